/* verbs_sysshm.c: sysshm.register, sysshm.status and sysshm.unregister: Triton's system shared
 * memory, regions of the whole server over POSIX shm objects (config oip_shm; the Open Inference
 * Protocol's frontends translate /v2/systemsharedmemory to these; docs/PROTOCOL.md, "System
 * shared memory"). An object is mapped only when it belongs to the caller's uid: a local peer's
 * credentials, or the uid the kernel's socket table gives a loopback tcp peer. Loop thread. */
#include "verbs_sysshm.h"

#include <stdio.h>
#include <string.h>

/* The server's regions, or NULL with r answered: off, or not for this caller. */
static dmn_shm_set *sys_set(dmn_srv *s, dmn_req *r)
{
	if (!s->sysshm) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "system shared memory is off on this server (config oip_shm)");
		return NULL;
	}
	return s->sysshm;
}

/* The caller's uid: its credentials (unix, ipc) or its local tcp uid; false when unknown. */
static bool caller_uid(const dmn_req *r, uint32_t *uid)
{
	if (r->client && r->client->creds) {
		*uid = (uint32_t)r->client->uid;
		return true;
	}
	if (r->chan && r->chan->has_local_uid) {
		*uid = r->chan->local_uid;
		return true;
	}
	return false;
}

void dmn_v_sysshm_register(dmn_srv *s, dmn_req *r)
{
	dmn_shm_set *set = sys_set(s, r);
	if (!set)
		return;
	const char *name = dmn_json_str(r->pm.json, "name"), *key = dmn_json_str(r->pm.json, "key");
	const cJSON *jo = cJSON_GetObjectItemCaseSensitive(r->pm.json, "offset");
	const cJSON *jb = cJSON_GetObjectItemCaseSensitive(r->pm.json, "byte_size");
	int64_t off = 0, size = 0;
	uint32_t uid = 0;
	char err[320];
	tsd_status st = TSD_OK;
	if (!name || !key)
		st = dmn_bad(err, sizeof(err), TSD_BAD_REQUEST, "%s: required (a string)", name ? "key" : "name");
	else if ((jo && !proto_json_int(jo, 0, INT64_MAX / 2, &off)) || !proto_json_int(jb, 1, INT64_MAX / 2, &size))
		st = dmn_bad(err, sizeof(err), TSD_BAD_REQUEST, "%s: a byte count", jb && proto_json_int(jb, 1, INT64_MAX / 2, &size) ? "offset" : "byte_size");
	else if (!caller_uid(r, &uid))
		st = dmn_bad(err, sizeof(err), TSD_UNAUTHORISED,
			     "system shared memory needs a local caller whose uid the daemon can tell (loopback tcp or a socket file)");
	if (st == TSD_OK) {
		dmn_shm_limits lim = {.regions_max = s->cfg.shm_regions_max, .client_bytes_max = s->cfg.shm_client_bytes_max};
		st = dmn_shm_register_key(set, &lim, name, key, (uint64_t)off, (uint64_t)size, uid, err, sizeof(err));
	}
	if (st != TSD_OK) {
		dmn_fail(s, r, st, "%s", err);
		return;
	}
	cJSON *x = cJSON_CreateObject();
	if (x)
		cJSON_AddStringToObject(x, "name", name);
	dmn_reply_ok(s, r, x, NULL, 0);
}

void dmn_v_sysshm_status(dmn_srv *s, dmn_req *r)
{
	dmn_shm_set *set = sys_set(s, r);
	if (!set)
		return;
	const char *name = dmn_json_str(r->pm.json, "name");
	const dmn_shm_region *all[1024];
	int n = dmn_shm_set_list(set, all, 1024);
	if (name && !dmn_shm_find(set, name)) {
		dmn_fail(s, r, TSD_BAD_REQUEST, "name: no region \"%.64s\" is registered", name);
		return;
	}
	cJSON *x = cJSON_CreateObject(), *a = x ? cJSON_AddArrayToObject(x, "regions") : NULL;
	for (int i = n - 1; a && i >= 0; i--) { /* oldest first */
		if (name && strcmp(dmn_shm_name(all[i]), name))
			continue;
		uint64_t off;
		const char *key = dmn_shm_key(all[i], &off);
		cJSON *e = cJSON_CreateObject();
		if (!e)
			break;
		cJSON_AddItemToArray(a, e);
		cJSON_AddStringToObject(e, "name", dmn_shm_name(all[i]));
		cJSON_AddStringToObject(e, "key", key);
		cJSON_AddNumberToObject(e, "offset", (double)off);
		cJSON_AddNumberToObject(e, "byte_size", (double)dmn_shm_size(all[i]));
	}
	dmn_reply_ok(s, r, x, NULL, 0);
}

void dmn_v_sysshm_unregister(dmn_srv *s, dmn_req *r)
{
	dmn_shm_set *set = sys_set(s, r);
	if (!set)
		return;
	const char *name = dmn_json_str(r->pm.json, "name");
	char err[256];
	if (name) {
		if (dmn_shm_unregister(set, name, err, sizeof(err)) != TSD_OK) {
			dmn_fail(s, r, TSD_BAD_REQUEST, "%s", err);
			return;
		}
	} else { /* every region (requests in flight keep theirs mapped) */
		const dmn_shm_region *all[1024];
		char names[64][DMN_NAME_LEN_MAX + 1];
		int n;
		while ((n = dmn_shm_set_list(set, all, 64)) > 0) {
			for (int i = 0; i < n; i++)
				snprintf(names[i], sizeof(names[i]), "%s", dmn_shm_name(all[i]));
			for (int i = 0; i < n; i++)
				dmn_shm_unregister(set, names[i], err, sizeof(err));
		}
	}
	cJSON *x = cJSON_CreateObject();
	if (x && name)
		cJSON_AddStringToObject(x, "name", name);
	dmn_reply_ok(s, r, x, NULL, 0);
}
