/* render.c: a kernel rendered for a device's target and named after its text, the name every
 * cache, DEBUG line and profile shows (realize, the kernel search and the shadow target use it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cstyle.h"
#include "util/hash.h"

/* tinygrad-style name: r_ for kernels with reductions, E_ otherwise, then the loop sizes. */
static void base_name(const eng_kernel_ir *ir, char *out, size_t len)
{
	size_t l = (size_t)snprintf(out, len, "%s", ir->nphases ? "r" : "E");
	for (int d = 0; d < ir->ndim && l < len; d++)
		if (ir->shape[d] > 1)
			l += (size_t)snprintf(out + l, len - l, "_%lld", (long long)ir->shape[d]);
	if (ir->nphases && l < len) {
		const eng_phase *ph = &ir->phases[0];
		for (int k = 0; k < ph->nred && l < len; k++) /* a reduction blocked for the caches (its first axis): all of it */
			l += (size_t)snprintf(out + l, len - l, "_%lld",
					      (long long)(k == 0 && ir->kbvar >= 0 ? ir->kfull : ir->loops[ph->red[k]].n));
	}
}

eng_status eng_render_kernel(const bk_target *t, eng_kernel_ir *ir, char name[96], char **src)
{
	eng_strbuf b;
	eng_strbuf_init(&b);
	*src = NULL;
	eng_status s = eng_render_cstyle(t, ir, "KERNEL_NAME", &b);
	if (s) {
		eng_strbuf_free(&b);
		return s;
	}
	char *body = eng_strbuf_take(&b);
	char base[64];
	base_name(ir, base, sizeof(base));
	snprintf(name, 96, "%s_%08llx", base, (unsigned long long)(eng_hash_str(body) & 0xffffffffu));
	/* every mention: a split reduction also defines <name>_fin and <name>_scratch */
	bool found = body && strstr(body, "KERNEL_NAME");
	const char *rest = body;
	eng_strbuf_init(&b);
	for (char *p; found && (p = strstr(rest, "KERNEL_NAME")); rest = p + strlen("KERNEL_NAME")) {
		*p = 0;
		eng_strbuf_puts(&b, rest);
		eng_strbuf_puts(&b, name);
	}
	if (found)
		eng_strbuf_puts(&b, rest);
	free(body);
	if (b.failed || !found) {
		eng_strbuf_free(&b);
		return ENG_ENOMEM;
	}
	*src = eng_strbuf_take(&b);
	snprintf(ir->name, sizeof(ir->name), "%s", name);
	return ENG_OK;
}
