/* verbs_shm.c: shm.register and shm.unregister, a connection's shared-memory regions (the fd
 * comes with the request over unix://; docs/PROTOCOL.md, "Shared memory"). Loop thread. */
#include "verbs_shm.h"

#include <unistd.h>

#include "shm_refs.h"

void dmn_v_shm_register(dmn_srv *s, dmn_req *r)
{
	int fd = r->fd;
	r->fd = -1;
	if (fd < 0) {
		dmn_fail(s, r, TSD_BAD_REQUEST,
			 "shm.register: no file descriptor came with the request (a memfd sent with SCM_RIGHTS over unix://)");
		return;
	}
	const char *name = dmn_json_str(r->pm.json, "name");
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(r->pm.json, "writable");
	char err[256];
	tsd_status st = TSD_OK;
	if (!name)
		st = dmn_bad(err, sizeof(err), TSD_BAD_REQUEST, "name: the region's name (a string) is required");
	else if (w && !cJSON_IsBool(w))
		st = dmn_bad(err, sizeof(err), TSD_BAD_REQUEST, "writable: true or false");
	else if (r->pm.ntensors)
		st = dmn_bad(err, sizeof(err), TSD_BAD_REQUEST, "tensors: shm.register takes none");
	else if (s->cfg.shm_regions_max == 0)
		st = dmn_bad(err, sizeof(err), TSD_BAD_REQUEST, "shm.register: shared memory is off (shm_regions_max 0)");
	else if (!r->client->shm && !(r->client->shm = dmn_shm_set_new()))
		st = dmn_bad(err, sizeof(err), TSD_OUT_OF_MEMORY, "out of memory");
	uint64_t size = 0;
	if (st == TSD_OK) {
		dmn_shm_limits lim = {.regions_max = s->cfg.shm_regions_max,
				      .client_bytes_max = s->cfg.shm_client_bytes_max};
		st = dmn_shm_register(r->client->shm, &lim, name, fd, cJSON_IsTrue(w), &size, err, sizeof(err));
	}
	close(fd);
	if (st != TSD_OK) {
		dmn_fail(s, r, st, "%s", err);
		return;
	}
	cJSON *x = cJSON_CreateObject();
	if (x) {
		cJSON_AddStringToObject(x, "name", name);
		cJSON_AddNumberToObject(x, "size", (double)size);
		cJSON_AddBoolToObject(x, "writable", cJSON_IsTrue(w));
	}
	dmn_reply_ok(s, r, x, NULL, 0);
}

void dmn_v_shm_unregister(dmn_srv *s, dmn_req *r)
{
	const char *name = dmn_json_str(r->pm.json, "name");
	char err[256];
	tsd_status st = name ? dmn_shm_unregister(r->client->shm, name, err, sizeof(err))
			     : dmn_bad(err, sizeof(err), TSD_BAD_REQUEST, "name: the region's name (a string) is required");
	if (st != TSD_OK) {
		dmn_fail(s, r, st, "%s", err);
		return;
	}
	cJSON *x = cJSON_CreateObject();
	if (x)
		cJSON_AddStringToObject(x, "name", name);
	dmn_reply_ok(s, r, x, NULL, 0);
}
