/* config_cli.c: tensord's command line: --config, --help, --version, --check-config and one
 * --KEY VALUE flag per table key, applied over the file; the --help text from the table. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The flags that are not keys. */
enum { F_KEY, F_CONFIG, F_HELP, F_VERSION, F_CHECK };

/* Split "--name[=value]" into a key name (dashes read as underscores, so --batch-max works too)
 * and its inline value (NULL if none). Returns F_*, or -1 if arg is not a flag. */
static int flag_of(const char *arg, char *name, size_t cap, const char **inline_val)
{
	if (strncmp(arg, "--", 2) || !arg[2])
		return -1;
	size_t n = strcspn(arg + 2, "=");
	*inline_val = arg[2 + n] == '=' ? arg + 3 + n : NULL;
	snprintf(name, cap, "%.*s", (int)n, arg + 2);
	for (char *p = name; *p; p++)
		if (*p == '-')
			*p = '_';
	if (!strcmp(name, "config"))
		return F_CONFIG;
	if (!strcmp(name, "help"))
		return F_HELP;
	if (!strcmp(name, "version"))
		return F_VERSION;
	if (!strcmp(name, "check_config"))
		return F_CHECK;
	return F_KEY;
}

dmn_cfg_status dmn_config_from_args(dmn_config *cfg, dmn_cli *cli, int argc, char *const *argv,
				    const dmn_env *env, char *err, size_t errlen)
{
	char name[72];
	const char *iv;
	dmn_cfg_status st;
	memset(cli, 0, sizeof(*cli));
	if ((st = dmn_config_defaults(cfg, err, errlen)))
		return st;
	/* First pass: the command's shape and --config, so the file comes before every flag
	 * wherever --config stands. */
	for (int i = 1; i < argc; i++) {
		int f = flag_of(argv[i], name, sizeof(name), &iv);
		if (f < 0)
			return dmn_cfg_fail(
				err, errlen, DMN_CFG_EUSAGE,
				"unexpected argument \"%s\" (flags are --KEY VALUE; see --help)",
				argv[i]);
		if ((f == F_HELP || f == F_VERSION || f == F_CHECK) && iv)
			return dmn_cfg_fail(err, errlen, DMN_CFG_EUSAGE, "--%s takes no value", name);
		cli->help |= f == F_HELP;
		cli->version |= f == F_VERSION;
		cli->check_config |= f == F_CHECK;
		if (f == F_KEY && !dmn_cfg_find(name))
			return dmn_cfg_fail(err, errlen, DMN_CFG_EKEY,
				    "unknown flag --%s (did you mean --%s?)", name,
				    dmn_cfg_nearest(name)->name);
		if (f == F_KEY || f == F_CONFIG) {
			if (!iv && i + 1 >= argc)
				return dmn_cfg_fail(err, errlen, DMN_CFG_EUSAGE, "--%s needs a value",
					    name);
			const char *v = iv ? iv : argv[++i];
			if (f == F_CONFIG)
				cli->config_path = v;
		}
	}
	if (cli->help || cli->version)
		return DMN_CFG_OK;
	if (cli->config_path && (st = dmn_config_apply_file(cfg, cli->config_path, err, errlen)))
		return st;
	for (int i = 1; i < argc; i++) {
		int f = flag_of(argv[i], name, sizeof(name), &iv);
		if (f != F_KEY && f != F_CONFIG)
			continue;
		const char *v = iv ? iv : argv[++i];
		if (f == F_KEY && (st = dmn_config_set(cfg, name, v, err, errlen)))
			return st;
	}
	return dmn_config_finish(cfg, env, err, errlen);
}

/* The bounds of k in words, for --help. */
static void bounds_text(const dmn_cfg_key *k, char *out, size_t cap)
{
	switch (k->type) {
	case DMN_CFG_INT:
	case DMN_CFG_U64:
		snprintf(out, cap, "%.0f..%.0f", k->lo, k->hi);
		break;
	case DMN_CFG_DBL:
		snprintf(out, cap, "%g..%g", k->lo, k->hi);
		break;
	case DMN_CFG_ENUM:
		snprintf(out, cap, "one of %s", k->choices);
		break;
	case DMN_CFG_STR:
		snprintf(out, cap, "%.0f..%.0f bytes", k->lo, k->hi);
		break;
	case DMN_CFG_STR_LIST:
		snprintf(out, cap, "each %.0f..%.0f bytes, at most %d", k->lo, k->hi,
			 DMN_CFG_LIST_MAX);
		break;
	case DMN_CFG_INT_LIST:
		snprintf(out, cap, "each %.0f..%.0f, at most %d", k->lo, k->hi, DMN_CFG_LIST_MAX);
		break;
	default:
		snprintf(out, cap, "true or false");
		break;
	}
}

char *dmn_config_help(const char *prog)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	fprintf(f,
		"Usage: %s [--config PATH] [--check-config] [--KEY VALUE | --KEY=VALUE ...]\n"
		"       %s --help | --version\n"
		"tensord %s: the tensor daemon: serves models, graphs, inference and training to\n"
		"clients over nng sockets (docs/PROTOCOL.md). Runs in the foreground until SIGTERM\n"
		"(drain, exit 0); SIGHUP re-reads the config.\n\n"
		"  --config PATH    read this JSON config file first (an object of the keys "
		"below)\n"
		"  --check-config   check the config, print the effective config as JSON, exit 0 "
		"(valid) or 2\n"
		"  --help           this text\n"
		"  --version        print the version\n\n"
		"Keys, in the config file or as flags (flags override the file; a list flag is a "
		"JSON array\n"
		"or comma-separated; \"${RUNTIME_DIR}\" is $XDG_RUNTIME_DIR/tensord, else "
		"/run/tensord):\n",
		prog, prog, DMN_VERSION);
	for (int i = 0; i < dmn_cfg_nkeys; i++) {
		const dmn_cfg_key *k = &dmn_cfg_keys[i];
		char b[96];
		bounds_text(k, b, sizeof(b));
		fprintf(f, "  --%s <%s>  default %s  (%s)\n      %s\n", k->name,
			dmn_cfg_type_name(k->type), k->def, b, k->doc);
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}
