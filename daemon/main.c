/* main.c: the tensord binary's entry point: the command line and config, --help, --version,
 * --check-config. The server (issue 12) will start where this now prints the config and stops. */
#include <stdio.h>
#include <stdlib.h>

#include "config.h"

int main(int argc, char **argv)
{
	dmn_config cfg;
	dmn_cli cli;
	dmn_env env;
	char err[4608];
	dmn_env_current(&env);
	dmn_cfg_status st = dmn_config_from_args(&cfg, &cli, argc, argv, &env, err, sizeof(err));
	int rc = 0;
	if (st == DMN_CFG_OK && cli.help) {
		char *h = dmn_config_help("tensord");
		rc = h && fputs(h, stdout) >= 0 ? 0 : 1;
		free(h);
	} else if (st == DMN_CFG_OK && cli.version) {
		printf("tensord %s\n", DMN_VERSION);
	} else if (st != DMN_CFG_OK) {
		fprintf(stderr, "tensord: %s\n", err);
		rc = 2;
	} else {
		char *js = dmn_config_json(&cfg, true);
		if (!js) {
			fprintf(stderr, "tensord: out of memory\n");
			rc = 1;
		} else {
			printf("%s\n", js);
			free(js);
			if (!cli.check_config)
				fprintf(stderr,
					"tensord: the server is not built yet (issue 12)\n");
		}
	}
	dmn_config_free(&cfg);
	return rc;
}
