/* check.c: `make install-check`'s program, built against an installed libtensord with nothing but
 * `pkg-config --cflags --libs tensord`: connects to the installed tensord at argv[1], says hello,
 * and realizes y = relu(x @ w + b) built with the graph builder, checking the numbers; dtype.h's
 * functions come from the library too (the installed headers hold nothing of the engine). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tensord/verbs.h>

static int fail(const char *what, tsd_status s, const char *msg)
{
	fprintf(stderr, "install-check: %s: %s: %s\n", what, tsd_status_name(s), msg ? msg : "");
	return 1;
}

int main(int argc, char **argv)
{
	char err[256] = "";
	if (argc != 2)
		return fprintf(stderr, "usage: %s URL\n", argv[0]), 2;
	tsd_client *c = tsd_client_open_wait(argv[1], 10000, 10000, err, sizeof(err));
	if (!c)
		return fail("open", TSD_INTERNAL, err);
	tsd_reply *r;
	tsd_status s = tsd_hello(c, &r);
	if (s != TSD_OK)
		return fail("hello", s, tsd_client_message(c, r));
	tsd_reply_free(r);

	tsd_dtype dt;
	if (tsd_dtype_size(TSD_F32) != 4 || strcmp(tsd_dtype_name(TSD_F16), "float16") ||
	    !tsd_dtype_parse("i64", &dt) || dt != TSD_I64 || tsd_f16_to_double(tsd_f16_bits(1.5)) != 1.5)
		return fail("dtype", TSD_INTERNAL, "tsd_dtype_* disagree with dtype.h");

	tsd_graph *g = tsd_graph_create();
	int x = tsd_g_input(g, "x", TSD_F32, 2, (const int64_t[]){2, 3});
	int w = tsd_g_param(g, "w", TSD_F32, 2, (const int64_t[]){3, 2});
	int b = tsd_g_param(g, "b", TSD_F32, 1, (const int64_t[]){2});
	tsd_graph_output(g, tsd_g_relu(g, tsd_g_add(g, tsd_g_matmul(g, x, w), b)), "y");
	cJSON *gj = tsd_graph_json(g);
	if (!gj)
		return fail("graph", tsd_graph_status(g), tsd_graph_error(g));
	float xv[6] = {1, 2, 3, -1, -2, -3}, wv[6] = {1, 0, 0, 1, 1, 1}, bv[2] = {0.5f, -0.5f};
	tsd_tensor in[3] = {
		{.name = "x", .dtype = TSD_F32, .ndim = 2, .shape = {2, 3}, .data = xv},
		{.name = "w", .dtype = TSD_F32, .ndim = 2, .shape = {3, 2}, .data = wv},
		{.name = "b", .dtype = TSD_F32, .ndim = 1, .shape = {2}, .data = bv},
	};
	s = tsd_realize(c, gj, in, 3, 0, &r);
	if (s != TSD_OK)
		return fail("realize", s, tsd_client_message(c, r));
	const tsd_tensor *y = tsd_reply_find(r, "y");
	float want[4] = {4.5f, 4.5f, 0, 0}, got[4];
	if (!y || y->dtype != TSD_F32 || y->nbytes != sizeof(got))
		return fail("realize", TSD_INTERNAL, "no float32 [2,2] output y");
	memcpy(got, y->data, sizeof(got));
	for (int i = 0; i < 4; i++)
		if (fabsf(got[i] - want[i]) > 1e-5f)
			return fprintf(stderr, "install-check: y[%d] = %g, want %g\n", i, got[i], want[i]), 1;
	tsd_reply_free(r);
	cJSON_Delete(gj);
	tsd_graph_free(g);
	tsd_client_close(c);
	printf("install-check: ok (hello, graph builder, realize through the installed library)\n");
	return 0;
}
