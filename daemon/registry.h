/* registry.h: the models layer's lower half, what a model is (loop thread): the registry of
 * names (registry.c), a model.load object parsed into a version's description (spec.c, and
 * spec_onnx.c for ONNX files), and a request's inputs checked against a version (inputs.c). */
#ifndef DMN_REGISTRY_H
#define DMN_REGISTRY_H

#include "executor.h"
#include "types.h"
#include "util.h"

/* ---- registry.c ---- */
bool dmn_name_ok(const char *name); /* [A-Za-z0-9_.-]{1,DMN_NAME_MAX} */
dmn_model *dmn_model_find(dmn_srv *s, const char *name);
/* Versions of a model served beside its default one (a repository's version_policy) are models
 * of their own named NAME@V (a name no client can load: '@' is not allowed). The alias of base's
 * version into out (false when it does not fit); the version name is an alias of base for (0:
 * none); the model serving m's version (m itself, or its alias), or NULL. */
bool dmn_alias_name(const char *base, int version, char *out, size_t cap);
int dmn_alias_of(const char *name, const char *base);
dmn_model *dmn_model_version(dmn_srv *s, dmn_model *m, int version);
/* A new, empty model of that name in the registry; NULL when out of memory. */
dmn_model *dmn_model_add(dmn_srv *s, const char *name);
void dmn_model_remove(dmn_srv *s, dmn_model *m); /* out of the registry (m itself is kept) */
void dmn_model_release(dmn_srv *s, dmn_model *m); /* refs--, free a removed one at 0 */
/* A model.list entry (m has a version serving). */
cJSON *dmn_model_json(const dmn_srv *s, const dmn_model *m);
/* After the loop ended: every model and its serving version's description. */
void dmn_registry_free(dmn_srv *s);

/* ---- spec.c ---- */
/* Parse a model.load object (pm: its message, or NULL for a preload) into a new version
 * (caller frees with dmn_mver_free): graph, ports, batching (defaults from the config),
 * training, weights path; or an ONNX model's fields (its ports come when the executor loads it).
 * Failure: the status and err naming the field. */
tsd_status dmn_mver_parse(dmn_srv *s, const cJSON *spec, const proto_msg *pm, dmn_mver **out, char *err, size_t errlen);

/* ---- spec_onnx.c ---- */
/* The ONNX fields of a model.load (file or the tensor "onnx" of pm, shapes, constants,
 * f64_as_f32) into v; fields of graph models are refused. */
tsd_status dmn_onnx_spec(dmn_srv *s, const cJSON *spec, const proto_msg *pm, dmn_mver *v, char *err, size_t errlen);

/* ---- spec_seq.c ---- */
/* A model.load's "sequence" (state pairs, max_sequences, max_sequence_idle_us,
 * outlive_connection) into v, the limits' defaults from the config; the pairs are resolved
 * against the ports later (dmn_state_resolve). */
tsd_status dmn_seq_spec(dmn_srv *s, const cJSON *spec, dmn_mver *v, char *err, size_t errlen);

/* ---- inputs.c ---- */
/* Check m's tensors against v's inputs (and the target when train): rows into *rows. The inputs
 * in the implicit mask (bit q: input q; a sequence step's state) must not be given. */
tsd_status dmn_check_inputs(const dmn_mver *v, const proto_msg *m, bool train, uint64_t implicit, int64_t *rows,
			    char *err, size_t errlen);

#endif
