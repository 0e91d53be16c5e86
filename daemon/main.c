/* main.c: the tensord binary's entry point: the command line and config (--help, --version,
 * --check-config), then the server (server.c) until SIGTERM. */
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "server.h"
#include "util.h"

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
		printf("tensord %s (protocol %d)\n", DMN_VERSION, TSD_PROTOCOL_VERSION);
	} else if (st != DMN_CFG_OK) {
		fprintf(stderr, "tensord: %s\n", err);
		rc = 2;
	} else if (cli.check_config) {
		char *js = dmn_config_json(&cfg, true);
		rc = js && printf("%s\n", js) >= 0 ? 0 : 1;
		free(js);
	} else {
		dmn_malloc_tune(argv); /* returns only where it need not or cannot re-execute */
		return dmn_serve(&cfg, argc, argv);
	}
	dmn_config_free(&cfg);
	return rc;
}
