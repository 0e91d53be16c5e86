/* devices: lists the devices this machine offers (the CPU and every OpenCL device, with their
 * properties); with a name (CPU, CPU:n, CL, CL:n) checks that it opens and runs a kernel there,
 * exiting 1 with the reason if it cannot. */
#include <stdio.h>
#include <stdlib.h>

#include <tensord/engine.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		static char list[16384];
		eng_devices_list(list, sizeof(list));
		fputs(list, stdout);
		return 0;
	}
	eng_ctx_opts o;
	eng_ctx_opts_default(&o);
	o.device = argv[1];
	char err[512];
	eng_ctx *ctx = eng_ctx_create(&o, err, sizeof(err));
	if (!ctx) {
		printf("%s: unavailable: %s\n", argv[1], err);
		return 1;
	}
	float x[4] = {1, 2, 3, 4}, y = 0;
	eng_tensor *t = eng_from_data(ctx, ENG_F32, 1, (int64_t[]){4}, x);
	eng_tensor *s = eng_sum(eng_mul(t, t), NULL, 0, false);
	int rc = eng_tensor_read(s, &y, sizeof(y)) || y != 30.0f;
	printf("%s: %s (sum of squares 1..4 = %g)\n", eng_device_name(ctx, 0), rc ? eng_errmsg(ctx) : "ok", y);
	eng_ctx_destroy(ctx);
	return rc;
}
