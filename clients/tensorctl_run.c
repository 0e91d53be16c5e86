/* tensorctl_run.c: tensorctl's commands that change or run things: load, unload, infer, realize
 * and save; tensors in from JSON, raw bytes or .npy, out as JSON or .npy files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorctl.h"

const char tctl_load_help[] =
	"usage: tensorctl load SPEC.json [--weights FILE.safetensors] [--upload FILE.safetensors]\n"
	"                      [PARAM=FILE.npy ...] [--name NAME]\n"
	"       tensorctl load GRAPH.json --name NAME [--upload FILE.safetensors] ...\n"
	"       tensorctl load MODEL.onnx [--name NAME] [--shape INPUT=D,D,...] [--const INPUT=V,V,...]\n"
	"                      [--f64-as-f32] [--batch-max N]\n"
	"\n"
	"Load (or hot-swap) a model. SPEC.json is the model.load object of docs/PROTOCOL.md\n"
	"(name, graph, weights, inputs, outputs, device, batching, train); GRAPH.json a bare\n"
	"graph ({\"nodes\", \"outputs\"}) loaded with the daemon's default batching.\n"
	"  --name NAME      the model's name (over the spec's)\n"
	"  --weights FILE   a safetensors file the daemon reads, relative to its models_dir\n"
	"  --upload FILE    a safetensors file read here, its tensors sent with the request\n"
	"  PARAM=FILE.npy   one param's weights read here and sent (these win over the file's)\n"
	"An .onnx file is read here and sent (name: its base name); a symbolic dim of its inputs\n"
	"is the batch axis. A SPEC.json with \"format\": \"onnx\" and \"file\" loads one from\n"
	"models_dir instead.\n"
	"  --shape IN=D,..  the input's dims (over the file's), -1 for the batch axis\n"
	"  --const IN=V,..  the input's values, fixed at load (it is then no input of the model)\n"
	"  --f64-as-f32     run float64 parts in float32 instead of refusing them\n"
	"  --batch-max N    the most rows in one launch\n";
const char tctl_unload_help[] = "usage: tensorctl unload NAME\n\nUnload a model; requests "
				"still queued for it are answered cancelled.\n";
const char tctl_infer_help[] =
	"usage: tensorctl infer MODEL INPUT... [--out-dir DIR] [--priority P] [--timeout-ms MS]\n"
	"                       [--shm] [--sequence ID [--start] [--end] [--state]]\n"
	"       tensorctl infer MODEL --raw FILE --name X [--dtype DT] --shape 1,4\n"
	"\n"
	"Run a model once. Each INPUT is INPUT.json ({\"x\": {\"dtype\", \"shape\", \"data\"}, "
	"...},\n"
	"every tensor in it) or NAME=FILE.npy (a NumPy array, C order, little-endian; bool,\n"
	"uint8, int32, int64, float16, float32). Outputs: printed as JSON, or written as\n"
	"DIR/OUTPUT.npy with --out-dir (the paths printed). --priority: realtime, normal, bulk.\n"
	"--shm (unix:// only): the inputs go in a shared-memory region registered for the call,\n"
	"the request names them there instead of carrying their bytes (docs/PROTOCOL.md).\n"
	"--sequence ID: a step of a sequence of a model loaded with \"sequence\"\n"
	"(docs/PROTOCOL.md, \"Sequences\"): the daemon feeds the state the sequence's last step\n"
	"left, so the state inputs are not given. ID: digits are a number (1 to 2^53), anything\n"
	"else a string (1 to 128 bytes). --start starts it (again: the state is reset), --end\n"
	"ends it after this step, --state prints the state outputs too. A step of a sequence that\n"
	"is not live fails with sequence_ended (exit 1). A sequence ends when the connection that\n"
	"started it closes, so one that spans several tensorctl runs needs a model with\n"
	"\"outlive_connection\": true.\n";
const char tctl_realize_help[] =
	"usage: tensorctl realize GRAPH.json INPUT... [--out-dir DIR] [--timeout-ms MS]\n"
	"\n"
	"Run a graph once (docs/PROTOCOL.md, graph format). GRAPH.json: the graph object\n"
	"{\"nodes\", \"outputs\"} or an object with it under \"graph\". INPUTs as for infer: one\n"
	"tensor per input and param node, named by node id. Outputs as for infer.\n";
const char tctl_save_help[] =
	"usage: tensorctl save NAME [PATH.safetensors]\n"
	"       tensorctl save NAME --out-dir DIR\n"
	"\n"
	"Save a model's weights: with PATH the daemon writes them (relative to its models_dir);\n"
	"with --out-dir they come back and are written here as DIR/PARAM.npy.\n";

/* Send h (owned, deleted here) with in's tensors; an ok reply goes to print (its exit status). */
static int send_owned(tsd_client *c, cJSON *h, const tctl_inputs *in,
		      int (*print)(const tsd_reply *, const char *), const char *arg)
{
	tsd_reply *r;
	tsd_status s = tsd_client_call(c, h, in ? in->t : NULL, in ? in->n : 0, &r);
	int rc = tctl_outcome(c, s, r);
	if (!rc)
		rc = print(r, arg);
	tsd_reply_free(r);
	cJSON_Delete(h);
	return rc;
}

static const char *str_field(const cJSON *o, const char *key, const char *def)
{
	const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(j) ? j->valuestring : def;
}

static int print_loaded(const tsd_reply *r, const char *arg)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(tsd_reply_json(r), "model");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "version");
	printf("loaded %s version %g on %s\n", str_field(m, "name", "?"),
	       cJSON_IsNumber(v) ? v->valuedouble : 0, str_field(m, "device", "?"));
	return 0;
}

/* "NAME=a,b,c" into obj's NAME as an array of numbers; false (err set) when malformed. */
static bool named_numbers(cJSON *obj, const char *opt, const char *arg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1]) {
		snprintf(err, errlen, "%s %s: NAME=V,V,...", opt, arg);
		return false;
	}
	char name[256];
	snprintf(name, sizeof(name), "%.*s", (int)(eq - arg) < 255 ? (int)(eq - arg) : 255, arg);
	cJSON *a = cJSON_CreateArray();
	for (const char *p = eq + 1; a && *p; p += *p == ',') {
		char *end;
		double v = strtod(p, &end);
		if (end == p || (*end && *end != ',')) {
			snprintf(err, errlen, "%s %s: not a list of numbers", opt, arg);
			cJSON_Delete(a);
			return false;
		}
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v));
		p = end;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(obj, name);
	return a && cJSON_AddItemToObject(obj, name, a);
}

/* The model name an .onnx path gives: its base name without the extension, other characters
 * than A-Z a-z 0-9 _ . - made '_'. */
static void name_from_path(const char *path, char *out, size_t cap)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	size_t n = strlen(base) - 5; /* ".onnx" */
	if (n >= cap)
		n = cap - 1;
	for (size_t i = 0; i < n; i++) {
		char c = base[i];
		out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
				 c == '.' || c == '-'
			 ? c
			 : '_';
	}
	out[n] = 0;
}

static bool is_onnx(const char *path)
{
	size_t n = strlen(path);
	return n > 5 && !strcmp(path + n - 5, ".onnx");
}

int tctl_cmd_load(tctl_ctx *ctx, int argc, char **argv)
{
	const char *spec = NULL, *weights = NULL, *name = NULL;
	tctl_inputs in = {0};
	cJSON *shapes = cJSON_CreateObject(), *consts = cJSON_CreateObject();
	bool f64 = false;
	long batch_max = 0;
	char err[512];
	int rc = 0;
	for (int i = 0; i < argc && !rc; i++) {
		bool ok = true;
		if (!strcmp(argv[i], "--weights") && i + 1 < argc) {
			weights = argv[++i];
		} else if (!strcmp(argv[i], "--name") && i + 1 < argc) {
			name = argv[++i];
		} else if (!strcmp(argv[i], "--upload") && i + 1 < argc) {
			ok = tctl_safetensors_read(argv[++i], &in, err, sizeof(err));
		} else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
			ok = named_numbers(shapes, "--shape", argv[++i], err, sizeof(err));
		} else if (!strcmp(argv[i], "--const") && i + 1 < argc) {
			ok = named_numbers(consts, "--const", argv[++i], err, sizeof(err));
		} else if (!strcmp(argv[i], "--f64-as-f32")) {
			f64 = true;
		} else if (!strcmp(argv[i], "--batch-max") && i + 1 < argc) {
			char *end;
			batch_max = strtol(argv[++i], &end, 10);
			if (*end || batch_max < 1)
				rc = tctl_usage("load", "--batch-max: a positive integer");
		} else if (argv[i][0] != '-' && strchr(argv[i], '=')) {
			ok = tctl_inputs_arg(&in, argv[i], err, sizeof(err));
		} else if (!spec && argv[i][0] != '-') {
			spec = argv[i];
		} else {
			rc = tctl_usage("load", "unexpected argument %s", argv[i]);
		}
		if (!ok) {
			fprintf(stderr, "tensorctl load: %s\n", err);
			rc = TCTL_EXIT_USAGE;
		}
	}
	if (!rc && !spec)
		rc = tctl_usage("load", "needs SPEC.json, GRAPH.json or MODEL.onnx");
	bool onnx = !rc && is_onnx(spec);
	if (!rc && !onnx && (shapes->child || consts->child || f64 || batch_max))
		rc = tctl_usage("load", "--shape, --const, --f64-as-f32 and --batch-max are for .onnx files");
	cJSON *h = NULL;
	if (!rc && onnx) {
		size_t len;
		char *bytes = tctl_read_file(spec, &len, err, sizeof(err)), dims[32], base[65];
		snprintf(dims, sizeof(dims), "%zu", len);
		if (!bytes || !tctl_inputs_raw(&in, "onnx", "uint8", dims, bytes, len, err, sizeof(err))) {
			fprintf(stderr, "tensorctl load: %s\n", err);
			rc = TCTL_EXIT_USAGE;
		}
		name_from_path(spec, base, sizeof(base));
		h = cJSON_CreateObject();
		cJSON_AddStringToObject(h, "name", base);
		cJSON_AddStringToObject(h, "format", "onnx");
		if (shapes->child)
			cJSON_AddItemReferenceToObject(h, "shapes", shapes);
		if (consts->child)
			cJSON_AddItemReferenceToObject(h, "constants", consts);
		if (f64)
			cJSON_AddTrueToObject(h, "f64_as_f32");
		if (batch_max)
			cJSON_AddNumberToObject(cJSON_AddObjectToObject(h, "batching"), "max", (double)batch_max);
	} else if (!rc) {
		h = tctl_json_file(spec, err, sizeof(err));
		if (!h) {
			fprintf(stderr, "tensorctl load: %s\n", err);
			rc = TCTL_EXIT_USAGE;
		}
	}
	if (!rc && !onnx && cJSON_GetObjectItemCaseSensitive(h, "nodes")) { /* a bare graph */
		cJSON *g = h;
		h = cJSON_CreateObject();
		cJSON_AddItemToObject(h, "graph", g);
		if (!name)
			rc = tctl_usage("load", "%s is a graph: give the model's --name", spec);
	}
	if (!rc) {
		cJSON_DeleteItemFromObjectCaseSensitive(h, "verb");
		cJSON_AddStringToObject(h, "verb", "model.load");
		if (name) {
			cJSON_DeleteItemFromObjectCaseSensitive(h, "name");
			cJSON_AddStringToObject(h, "name", name);
		}
		if (weights) {
			cJSON_DeleteItemFromObjectCaseSensitive(h, "weights");
			cJSON_AddStringToObject(h, "weights", weights);
		}
		rc = send_owned(ctx->c, h, &in, print_loaded, NULL);
		h = NULL;
	}
	cJSON_Delete(h);
	cJSON_Delete(shapes);
	cJSON_Delete(consts);
	tctl_inputs_free(&in);
	return rc;
}

static int print_unloaded(const tsd_reply *r, const char *arg)
{
	printf("unloaded %s\n", str_field(tsd_reply_json(r), "name", "?"));
	return 0;
}

int tctl_cmd_unload(tctl_ctx *ctx, int argc, char **argv)
{
	if (argc != 1 || argv[0][0] == '-')
		return tctl_usage("unload", "needs NAME");
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "model.unload");
	cJSON_AddStringToObject(h, "name", argv[0]);
	return send_owned(ctx->c, h, NULL, print_unloaded, NULL);
}

/* The reply's tensors as {"NAME": {"dtype", "shape", "data"}, ...}, pretty, or with dir as
 * DIR/NAME.npy. */
static int print_outputs(const tsd_reply *r, const char *dir)
{
	if (dir)
		return tctl_write_outputs_npy(r, dir);
	cJSON *o = cJSON_CreateObject();
	for (int i = 0; o && i < tsd_reply_ntensors(r); i++) {
		const tsd_tensor *t = tsd_reply_tensor(r, i);
		cJSON_AddItemToObject(o, t->name, tctl_tensor_json(t));
	}
	char *text = o ? cJSON_Print(o) : NULL;
	puts(text ? text : "{}");
	free(text);
	cJSON_Delete(o);
	return 0;
}

/* Options shared by infer and realize. */
typedef struct run_opts {
	const char *out_dir, *priority;
	long timeout_ms;
	bool shm;
	const char *raw, *name, *dtype, *shape;
	const char *sequence;		    /* --sequence ID, or NULL */
	bool seq_start, seq_end, seq_state; /* --start, --end, --state */
} run_opts;

/* The arguments after MODEL or GRAPH: inputs into in, options into o. */
static int run_args(const char *cmd, int argc, char **argv, tctl_inputs *in, run_opts *o)
{
	char err[512];
	*o = (run_opts){.dtype = "float32", .timeout_ms = -1};
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const char **opt = !strcmp(a, "--raw")	      ? &o->raw
				   : !strcmp(a, "--name")     ? &o->name
				   : !strcmp(a, "--dtype")    ? &o->dtype
				   : !strcmp(a, "--shape")    ? &o->shape
				   : !strcmp(a, "--out-dir")  ? &o->out_dir
				   : !strcmp(a, "--priority") ? &o->priority
				   : !strcmp(a, "--sequence") ? &o->sequence
							      : NULL;
		bool *flag = !strcmp(a, "--start")   ? &o->seq_start
			     : !strcmp(a, "--end")   ? &o->seq_end
			     : !strcmp(a, "--state") ? &o->seq_state
						     : NULL;
		if (opt && i + 1 < argc) {
			*opt = argv[++i];
		} else if (!strcmp(a, "--timeout-ms") && i + 1 < argc) {
			if (!tctl_parse_long(argv[++i], 0, 3600000, &o->timeout_ms))
				return tctl_usage(cmd, "--timeout-ms %s: not in 0..3600000",
						  argv[i]);
		} else if (!strcmp(a, "--shm")) {
			o->shm = true;
		} else if (flag) {
			*flag = true;
		} else if (a[0] == '-') {
			return tctl_usage(cmd, "unexpected argument %s", a);
		} else if (!tctl_inputs_arg(in, a, err, sizeof(err))) {
			fprintf(stderr, "tensorctl %s: %s\n", cmd, err);
			return TCTL_EXIT_USAGE;
		}
	}
	if (!o->sequence && (o->seq_start || o->seq_end || o->seq_state))
		return tctl_usage(cmd, "--start, --end and --state need --sequence ID");
	if (o->raw) {
		size_t len;
		if (!o->name || !o->shape)
			return tctl_usage(cmd, "--raw needs --name X and --shape S");
		char *data = tctl_read_file(o->raw, &len, err, sizeof(err));
		if (!data || !tctl_inputs_raw(in, o->name, o->dtype, o->shape, data, len, err,
					      sizeof(err))) {
			fprintf(stderr, "tensorctl %s: %s\n", cmd, err);
			return TCTL_EXIT_USAGE;
		}
	}
	return 0;
}

static void add_run_fields(cJSON *h, const run_opts *o)
{
	if (o->priority)
		cJSON_AddStringToObject(h, "priority", o->priority);
	if (o->timeout_ms >= 0)
		cJSON_AddNumberToObject(h, "timeout_ms", (double)o->timeout_ms);
}

/* --sequence ID and its flags into h: digits are a number, anything else a string. A usage
 * error (printed) when the ID is out of range. */
static int add_sequence_fields(cJSON *h, const run_opts *o)
{
	if (!o->sequence)
		return 0;
	const char *id = o->sequence;
	size_t n = strlen(id);
	if (n && strspn(id, "0123456789") == n) {
		unsigned long long v = n <= 16 ? strtoull(id, NULL, 10) : 0;
		if (!v || v > (1ull << 53))
			return tctl_usage("infer", "--sequence %s: a number in 1..2^53 (or a name)",
					  id);
		cJSON_AddNumberToObject(h, "sequence_id", (double)v);
	} else if (!n || n > 128) {
		return tctl_usage("infer", "--sequence: a name of 1 to 128 bytes (or a number)");
	} else {
		cJSON_AddStringToObject(h, "sequence_id", id);
	}
	if (o->seq_start)
		cJSON_AddTrueToObject(h, "sequence_start");
	if (o->seq_end)
		cJSON_AddTrueToObject(h, "sequence_end");
	if (o->seq_state)
		cJSON_AddTrueToObject(h, "sequence_state");
	return 0;
}

/* infer --shm: in's tensors copied into one shared-memory region (each at a 64-byte offset),
 * named by reference in h (taken); the outputs printed as without. */
static int send_shm(tsd_client *c, cJSON *h, const tctl_inputs *in, const char *out_dir)
{
	size_t off[TCTL_MAX_TENSORS], len[TCTL_MAX_TENSORS], total = 0;
	for (int k = 0; k < in->n; k++) {
		len[k] = tsd_dtype_size(in->t[k].dtype); /* nbytes may be 0 in a tsd_tensor: from the shape */
		for (int d = 0; d < in->t[k].ndim; d++)
			len[k] *= (size_t)in->t[k].shape[d];
		off[k] = total;
		total += (len[k] + 63) / 64 * 64;
	}
	tsd_region *g = tsd_region_create(c, "tensorctl-inputs", total ? total : 64, false);
	if (!g) {
		fprintf(stderr, "tensorctl infer --shm: %s\n", tsd_client_error(c));
		cJSON_Delete(h);
		return TCTL_EXIT_DAEMON;
	}
	bool ok = true;
	for (int k = 0; k < in->n && ok; k++) {
		memcpy((unsigned char *)tsd_region_data(g) + off[k], in->t[k].data, len[k]);
		ok = tsd_shm_input(h, in->t[k].name, in->t[k].dtype, in->t[k].ndim, in->t[k].shape, g, off[k]);
	}
	int rc = ok ? send_owned(c, h, NULL, print_outputs, out_dir) : TCTL_EXIT_DAEMON;
	if (!ok) {
		fprintf(stderr, "tensorctl infer --shm: out of memory\n");
		cJSON_Delete(h);
	}
	tsd_region_destroy(g);
	return rc;
}

int tctl_cmd_infer(tctl_ctx *ctx, int argc, char **argv)
{
	if (argc < 1 || argv[0][0] == '-')
		return tctl_usage("infer", "needs MODEL and inputs");
	tctl_inputs in = {0};
	run_opts o;
	int rc = run_args("infer", argc - 1, argv + 1, &in, &o);
	if (!rc && !in.n)
		rc = tctl_usage("infer", "needs inputs (INPUT.json, NAME=FILE.npy or --raw)");
	if (!rc) {
		cJSON *h = cJSON_CreateObject();
		cJSON_AddStringToObject(h, "verb", "infer");
		cJSON_AddStringToObject(h, "model", argv[0]);
		add_run_fields(h, &o);
		if ((rc = add_sequence_fields(h, &o)))
			cJSON_Delete(h);
		else if (o.shm)
			rc = send_shm(ctx->c, h, &in, o.out_dir);
		else
			rc = send_owned(ctx->c, h, &in, print_outputs, o.out_dir);
	}
	tctl_inputs_free(&in);
	return rc;
}

int tctl_cmd_realize(tctl_ctx *ctx, int argc, char **argv)
{
	if (argc < 1 || argv[0][0] == '-')
		return tctl_usage("realize", "needs GRAPH.json");
	char err[512];
	cJSON *g = tctl_json_file(argv[0], err, sizeof(err));
	if (!g) {
		fprintf(stderr, "tensorctl realize: %s\n", err);
		return TCTL_EXIT_USAGE;
	}
	cJSON *inner = cJSON_DetachItemFromObjectCaseSensitive(g, "graph");
	if (inner) {
		cJSON_Delete(g);
		g = inner;
	}
	tctl_inputs in = {0};
	run_opts o;
	int rc = run_args("realize", argc - 1, argv + 1, &in, &o);
	if (!rc && o.priority)
		rc = tctl_usage("realize", "--priority is for infer");
	if (!rc && o.sequence)
		rc = tctl_usage("realize", "--sequence is for infer");
	if (!rc) {
		cJSON *h = cJSON_CreateObject();
		cJSON_AddStringToObject(h, "verb", "realize");
		cJSON_AddItemToObject(h, "graph", g);
		g = NULL;
		add_run_fields(h, &o);
		rc = send_owned(ctx->c, h, &in, print_outputs, o.out_dir);
	}
	cJSON_Delete(g);
	tctl_inputs_free(&in);
	return rc;
}

static int print_saved(const tsd_reply *r, const char *dir)
{
	if (dir)
		return tctl_write_outputs_npy(r, dir);
	printf("saved %s\n", str_field(tsd_reply_json(r), "path", "?"));
	return 0;
}

int tctl_cmd_save(tctl_ctx *ctx, int argc, char **argv)
{
	const char *name = NULL, *path = NULL, *dir = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--out-dir") && i + 1 < argc)
			dir = argv[++i];
		else if (argv[i][0] == '-')
			return tctl_usage("save", "unexpected argument %s", argv[i]);
		else if (!name)
			name = argv[i];
		else if (!path)
			path = argv[i];
		else
			return tctl_usage("save", "unexpected argument %s", argv[i]);
	}
	if (!name || !path == !dir)
		return tctl_usage("save",
				  "needs NAME and one of PATH.safetensors or --out-dir DIR");
	cJSON *h = cJSON_CreateObject();
	cJSON_AddStringToObject(h, "verb", "model.save");
	cJSON_AddStringToObject(h, "name", name);
	if (path)
		cJSON_AddStringToObject(h, "path", path);
	return send_owned(ctx->c, h, NULL, print_saved, dir);
}
