/* tensorctl_oip_http.c: `tensorctl bench --protocol http`'s client: an Open Inference Protocol
 * infer (Triton's binary tensor data: the JSON, then each input's bytes) built once and posted
 * over one keep-alive libcurl handle, so the bench measures the daemon's HTTP frontend the way an
 * HTTP client sees it. libcurl rather than a hand-written HTTP client: it is what such clients use. */
#include "tensorctl_oip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

typedef struct oip_http {
	CURL *h;
	struct curl_slist *headers;
	char *body;
	size_t len;
	char head[512]; /* the start of the answer, for an error's message */
	size_t got;
	char cerr[CURL_ERROR_SIZE];
} oip_http;

static bool http_global(char *err, size_t errlen)
{
	CURLcode c = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (c != CURLE_OK)
		snprintf(err, errlen, "libcurl: %s", curl_easy_strerror(c));
	return c == CURLE_OK;
}

static void http_global_end(void)
{
	curl_global_cleanup();
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	oip_http *o = arg;
	size_t len = size * n;
	if (o->got < sizeof(o->head) - 1) {
		size_t k = len < sizeof(o->head) - 1 - o->got ? len : sizeof(o->head) - 1 - o->got;
		memcpy(o->head + o->got, p, k);
		o->got += k;
		o->head[o->got] = 0;
	}
	return len;
}

static void http_close(void *conn);

static void *http_open(const char *url, const char *model, const tctl_inputs *in, long timeout_ms,
		       char *err, size_t errlen)
{
	oip_http *o = calloc(1, sizeof(*o));
	cJSON *j = cJSON_CreateObject(), *ins = j ? cJSON_AddArrayToObject(j, "inputs") : NULL;
	cJSON *pa = j ? cJSON_AddObjectToObject(j, "parameters") : NULL;
	if (!o || !ins || !pa)
		goto oom;
	cJSON_AddBoolToObject(pa, "binary_data_output", true);
	size_t data = 0;
	for (int i = 0; i < in->n; i++) {
		const tsd_tensor *t = &in->t[i];
		size_t nb = tctl_oip_nbytes(t);
		cJSON *e = cJSON_CreateObject(),
		      *sh = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
		if (!sh) {
			cJSON_Delete(e);
			goto oom;
		}
		cJSON_AddItemToArray(ins, e);
		cJSON_AddStringToObject(e, "name", t->name);
		cJSON_AddStringToObject(e, "datatype", tctl_oip_dtype(t->dtype));
		for (int d = 0; d < t->ndim; d++)
			cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
		cJSON_AddNumberToObject(cJSON_AddObjectToObject(e, "parameters"),
					"binary_data_size", (double)nb);
		data += nb;
	}
	char *js = cJSON_PrintUnformatted(j);
	if (!js)
		goto oom;
	size_t jl = strlen(js);
	if (!(o->body = malloc(jl + data + 1))) {
		free(js);
		goto oom;
	}
	memcpy(o->body, js, jl);
	free(js);
	o->len = jl;
	for (int i = 0; i < in->n; i++) {
		size_t nb = tctl_oip_nbytes(&in->t[i]);
		memcpy(o->body + o->len, in->t[i].data, nb);
		o->len += nb;
	}
	char hdr[96], full[1024];
	snprintf(hdr, sizeof(hdr), "Inference-Header-Content-Length: %zu", jl);
	snprintf(full, sizeof(full), "%s/v2/models/%s/infer", url, model);
	if (!(o->h = curl_easy_init()) || !(o->headers = curl_slist_append(NULL, hdr)) ||
	    !curl_slist_append(o->headers, "Content-Type: application/octet-stream") ||
	    !curl_slist_append(o->headers, "Expect:")) /* no 100-continue round trip */
		goto oom;
	curl_easy_setopt(o->h, CURLOPT_URL, full);
	curl_easy_setopt(o->h, CURLOPT_HTTPHEADER, o->headers);
	curl_easy_setopt(o->h, CURLOPT_POSTFIELDS, o->body);
	curl_easy_setopt(o->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->len);
	curl_easy_setopt(o->h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(o->h, CURLOPT_WRITEDATA, o);
	curl_easy_setopt(o->h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(o->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(o->h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(o->h, CURLOPT_ERRORBUFFER, o->cerr);
	cJSON_Delete(j);
	return o;
oom:
	snprintf(err, errlen, "out of memory");
	cJSON_Delete(j);
	http_close(o);
	return NULL;
}

static tctl_oip_result http_infer(void *conn, char *why, size_t whylen)
{
	oip_http *o = conn;
	o->got = 0;
	o->head[0] = 0;
	o->cerr[0] = 0;
	CURLcode c = curl_easy_perform(o->h);
	long code = 0;
	curl_easy_getinfo(o->h, CURLINFO_RESPONSE_CODE, &code);
	if (c != CURLE_OK) {
		snprintf(why, whylen, "http: %s", o->cerr[0] ? o->cerr : curl_easy_strerror(c));
		return TCTL_OIP_LOST;
	}
	if (code != 200) {
		snprintf(why, whylen, "http %ld: %.300s", code, o->head);
		return TCTL_OIP_ERROR;
	}
	return TCTL_OIP_OK;
}

static void http_close(void *conn)
{
	oip_http *o = conn;
	if (!o)
		return;
	if (o->h)
		curl_easy_cleanup(o->h);
	curl_slist_free_all(o->headers);
	free(o->body);
	free(o);
}

const tctl_oip_ops tctl_oip_http = {
	.name = "http",
	.url_flag = "--http-url",
	.default_url = "http://127.0.0.1:8000",
	.global = http_global,
	.global_end = http_global_end,
	.open = http_open,
	.infer = http_infer,
	.close = http_close,
};
