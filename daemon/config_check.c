/* config_check.c: what the load resolves from the environment (the runtime directory, the
 * daemon's uid) and the checks needing a whole value or several keys (addresses, paths). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUNTIME_TOKEN "${RUNTIME_DIR}"

void dmn_env_current(dmn_env *env)
{
	env->xdg_runtime_dir = getenv("XDG_RUNTIME_DIR");
	env->uid = (uint32_t)getuid();
}

dmn_cfg_status dmn_runtime_dir(const char *xdg_runtime_dir, char *out, size_t cap)
{
	int n;
	if (xdg_runtime_dir && xdg_runtime_dir[0] == '/')
		n = snprintf(out, cap, "%s/tensord", xdg_runtime_dir);
	else
		n = snprintf(out, cap, "/run/tensord");
	return n >= 0 && (size_t)n < cap ? DMN_CFG_OK : DMN_CFG_ERANGE;
}

/* *s with every RUNTIME_TOKEN replaced by dir (a new string replaces *s). */
static dmn_cfg_status expand(char **s, const char *dir)
{
	size_t count = 0, tl = strlen(RUNTIME_TOKEN), dl = strlen(dir);
	for (const char *p = strstr(*s, RUNTIME_TOKEN); p; p = strstr(p + tl, RUNTIME_TOKEN))
		count++;
	if (!count)
		return DMN_CFG_OK;
	char *out = malloc(strlen(*s) + count * dl + 1), *o = out;
	if (!out)
		return DMN_CFG_ENOMEM;
	for (const char *p = *s, *q; *p; p = q + tl) {
		if (!(q = strstr(p, RUNTIME_TOKEN))) {
			strcpy(o, p);
			o += strlen(p);
			break;
		}
		memcpy(o, p, (size_t)(q - p));
		o += q - p;
		memcpy(o, dir, dl);
		o += dl;
	}
	*o = 0;
	free(*s);
	*s = out;
	return DMN_CFG_OK;
}

/* Is host (as written in a URL, IPv6 without its brackets) a loopback address? */
static bool is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (!strcmp(host, "localhost"))
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	if (inet_pton(AF_INET6, host, &a6) == 1)
		return IN6_IS_ADDR_LOOPBACK(&a6);
	return false;
}

/* host (cap bytes) = url's host after the scheme's sl bytes (IPv6 without its brackets), *colon
 * = the port's ':'; false when there is none. */
static bool split_host(const char *url, size_t sl, char *host, size_t cap, const char **colon)
{
	const char *h = url + sl;
	if (*h == '[') {
		const char *close = strchr(h, ']');
		if (!close || close[1] != ':')
			return false;
		snprintf(host, cap, "%.*s", (int)(close - h - 1), h + 1);
		*colon = close + 1;
	} else {
		if (!(*colon = strrchr(h, ':')))
			return false;
		snprintf(host, cap, "%.*s", (int)(*colon - h), h);
	}
	return true;
}

bool dmn_cfg_url_loopback(const char *url)
{
	const char *sep = strstr(url, "://"), *colon;
	char host[256];
	return sep && split_host(url, (size_t)(sep - url) + 3, host, sizeof(host), &colon) && is_loopback(host);
}

bool dmn_cfg_url_hostport(const char *url, char *host, size_t hcap, char *port, size_t pcap)
{
	const char *sep = strstr(url, "://"), *colon;
	if (!sep || !split_host(url, (size_t)(sep - url) + 3, host, hcap, &colon) || !host[0] || !colon[1])
		return false;
	snprintf(port, pcap, "%s", colon + 1);
	return true;
}

/* scheme://HOST:PORT (HOST may be [v6]), the host loopback unless remote is allowed. */
static dmn_cfg_status check_hostport(const char *where, const char *url, const char *scheme,
				     bool remote, char *err, size_t errlen)
{
	size_t sl = strlen(scheme);
	if (strncmp(url, scheme, sl))
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID, "%s: \"%s\" must start with %s", where,
			    url, scheme);
	const char *colon;
	char host[256];
	if (!split_host(url, sl, host, sizeof(host), &colon))
		goto bad;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 0 || port > 65535 || !host[0])
		goto bad;
	if (!remote && !is_loopback(host))
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "%s: \"%s\" is not a loopback address (127.0.0.0/8, ::1 or localhost); "
			    "set tcp_allow_remote to true to listen on other addresses",
			    where, url);
	return DMN_CFG_OK;
bad:
	return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
		    "%s: \"%s\" is not %sHOST:PORT (port 0..65535, IPv6 in brackets)", where, url,
		    scheme);
}

/* tcp off loopback without a token would be open to anyone on the network. */
static dmn_cfg_status check_token(const dmn_config *c, char *err, size_t errlen)
{
	if (c->tcp_token_file[0] && c->tcp_token_file[0] != '/')
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "tcp_token_file: \"%s\" must be an absolute path", c->tcp_token_file);
	for (int i = 0; i < c->tcp_listen.n && !c->tcp_token_file[0]; i++)
		if (!dmn_cfg_url_loopback(c->tcp_listen.v[i]))
			return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
				    "tcp_listen[%d]: \"%s\" is not a loopback address and tcp_allow_remote "
				    "is set, but tcp_token_file is empty: anyone on the network could use "
				    "the daemon; set tcp_token_file (docs/isolation/auth.md)",
				    i, c->tcp_listen.v[i]);
	if (c->oip_http_listen[0] && !c->tcp_token_file[0] && !dmn_cfg_url_loopback(c->oip_http_listen))
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "oip_http_listen: \"%s\" is not a loopback address and tcp_allow_remote is set, but "
			    "tcp_token_file is empty: anyone on the network could use the daemon; set tcp_token_file "
			    "(its token then goes in \"Authorization: Bearer\", docs/isolation/auth.md)",
			    c->oip_http_listen);
	if (c->oip_grpc_listen[0] && !c->tcp_token_file[0] && !dmn_cfg_url_loopback(c->oip_grpc_listen))
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "oip_grpc_listen: \"%s\" is not a loopback address and tcp_allow_remote is set, but "
			    "tcp_token_file is empty: anyone on the network could use the daemon; set tcp_token_file "
			    "(its token then goes in the \"authorization: Bearer\" metadata, docs/isolation/auth.md)",
			    c->oip_grpc_listen);
	return DMN_CFG_OK;
}

/* A relative path with no ".." component (so it stays inside the directory it is joined to). */
static bool contained(const char *p)
{
	if (p[0] == '/')
		return false;
	for (const char *c = p; *c; c += strcspn(c, "/"), c += *c == '/')
		if (!strncmp(c, "..", 2) && (c[2] == '/' || !c[2]))
			return false;
	return true;
}

static dmn_cfg_status check(const dmn_config *c, char *err, size_t errlen)
{
	char where[64];
	dmn_cfg_status st;
	if (!c->listen.n && !c->tcp_listen.n)
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "listen and tcp_listen are both empty: nothing to listen on");
	for (int i = 0; i < c->listen.n; i++) {
		const char *a = c->listen.v[i];
		size_t skip = !strncmp(a, "ipc:///", 7) ? 6 : !strncmp(a, "unix:///", 8) ? 7 : 0;
		if (!skip)
			return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
				    "listen[%d]: \"%s\" is not unix:// or ipc:// and an absolute path (tcp "
				    "goes in tcp_listen)",
				    i, a);
		if (strlen(a + skip) > DMN_IPC_PATH_MAX)
			return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
				    "listen[%d]: the socket path \"%s\" is %zu bytes, a Unix "
				    "socket path holds at most %d",
				    i, a + skip, strlen(a + skip), DMN_IPC_PATH_MAX);
	}
	for (int i = 0; i < c->tcp_listen.n; i++) {
		snprintf(where, sizeof(where), "tcp_listen[%d]", i);
		if ((st = check_hostport(where, c->tcp_listen.v[i], "tcp://", c->tcp_allow_remote,
					 err, errlen)))
			return st;
	}
	if (c->http_listen[0] && (st = check_hostport("http_listen", c->http_listen, "http://",
						      c->tcp_allow_remote, err, errlen)))
		return st;
	if (c->oip_http_listen[0] && (st = check_hostport("oip_http_listen", c->oip_http_listen, "http://",
							  c->tcp_allow_remote, err, errlen)))
		return st;
	if (c->oip_grpc_listen[0] && (st = check_hostport("oip_grpc_listen", c->oip_grpc_listen, "grpc://",
							  c->tcp_allow_remote, err, errlen)))
		return st;
	if ((st = check_token(c, err, errlen)))
		return st;
	if (c->cache_dir[0] && c->cache_dir[0] != '/')
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "cache_dir: \"%s\" must be an absolute path", c->cache_dir);
	if (c->repository != DMN_REPO_OFF && !c->models_dir[0])
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID, "repository: \"%s\" needs models_dir (the repository's directory)",
			    c->repository == DMN_REPO_ALL ? "all" : "explicit");
	if (c->models_dir[0] && c->models_dir[0] != '/')
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "models_dir: \"%s\" must be an absolute path", c->models_dir);
	if (c->preload.n && !c->models_dir[0])
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "preload: models are loaded from models_dir, which is not set");
	for (int i = 0; i < c->preload.n; i++)
		if (!contained(c->preload.v[i]))
			return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
				    "preload[%d]: \"%s\" must be a path relative to models_dir "
				    "without \"..\"",
				    i, c->preload.v[i]);
	const dmn_intlist *b = &c->batch_buckets;
	if (!b->n)
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "batch_buckets: empty; at least one batch size is needed");
	for (int i = 0; i < b->n; i++) {
		if (i && b->v[i] <= b->v[i - 1])
			return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
				    "batch_buckets[%d]: %lld after %lld: buckets must be strictly "
				    "increasing",
				    i, (long long)b->v[i], (long long)b->v[i - 1]);
		if (b->v[i] > c->batch_max)
			return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
				    "batch_buckets[%d]: %lld is larger than batch_max (%lld)", i,
				    (long long)b->v[i], (long long)c->batch_max);
	}
	if (b->v[b->n - 1] != c->batch_max)
		return dmn_cfg_fail(err, errlen, DMN_CFG_EINVALID,
			    "batch_buckets: the largest bucket (%lld) must equal batch_max (%lld), "
			    "so that a full batch "
			    "has a bucket",
			    (long long)b->v[b->n - 1], (long long)c->batch_max);
	return DMN_CFG_OK;
}

dmn_cfg_status dmn_config_finish(dmn_config *cfg, const dmn_env *env, char *err, size_t errlen)
{
	char dir[4200];
	if (dmn_runtime_dir(env->xdg_runtime_dir, dir, sizeof(dir)))
		return dmn_cfg_fail(err, errlen, DMN_CFG_ERANGE, "XDG_RUNTIME_DIR is too long");
	for (int i = 0; i < dmn_cfg_nkeys; i++) {
		const dmn_cfg_key *k = &dmn_cfg_keys[i];
		char *f = (char *)cfg + k->offset;
		dmn_cfg_status st = DMN_CFG_OK;
		if (k->type == DMN_CFG_STR)
			st = expand((char **)f, dir);
		for (int e = 0; k->type == DMN_CFG_STR_LIST && !st && e < ((dmn_strlist *)f)->n;
		     e++)
			st = expand(&((dmn_strlist *)f)->v[e], dir);
		if (st)
			return dmn_cfg_fail(err, errlen, st, "%s: out of memory", k->name);
	}
	dmn_cfg_status st = check(cfg, err, errlen);
	if (st)
		return st;
	if (!cfg->allowed_uids.n) {
		if (!(cfg->allowed_uids.v = malloc(sizeof(int64_t))))
			return dmn_cfg_fail(err, errlen, DMN_CFG_ENOMEM, "allowed_uids: out of memory");
		cfg->allowed_uids.v[0] = env->uid;
		cfg->allowed_uids.n = 1;
	}
	return DMN_CFG_OK;
}
