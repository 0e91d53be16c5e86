/* tensorctl_jsonl.h: replay's fast path for JSON Lines: the top-level fields of a log line, its
 * inputs parsed straight into row buffers, and rows, strings and numbers appended as JSON. */
#ifndef TCTL_JSONL_H
#define TCTL_JSONL_H

#include "tensorctl.h"

typedef struct tctl_span {
	const char *p;
	size_t n;
} tctl_span;

/* A log line's fields as spans of its text (p NULL when absent): id (any JSON value, checked),
 * model (the string's contents), inputs (the object's text); a sequence step's sequence_id
 * (the value's text, checked as JSON only) and its flags (true or false literals). */
typedef struct tctl_line {
	tctl_span id, model, inputs;
	tctl_span seq_id;
	bool seq_start, seq_end, seq_state;
} tctl_line;

/* Scan the line [p, end): one JSON object, other members skipped. False with the reason. */
bool tctl_jsonl_scan(const char *p, const char *end, tctl_line *l, char *err, size_t errlen);
/* Parse the inputs object against m: input i's row (its per-row shape, nested lists or one
 * number) into rows[i] (row_numel elements of its dtype). Every input exactly once, but those
 * of implicit (bit i: input i), which must be absent (a sequence step's state). */
bool tctl_jsonl_inputs(tctl_span inputs, const tctl_model *m, uint64_t implicit, void *const *rows,
		       char *err, size_t errlen);

/* A growing output buffer. */
typedef struct tctl_buf {
	char *p;
	size_t n, cap;
	bool oom; /* an allocation failed: the contents are incomplete */
} tctl_buf;

/* Room for extra more bytes; false (and oom set) when out of memory. */
bool tctl_buf_reserve(tctl_buf *b, size_t extra);
void tctl_buf_put(tctl_buf *b, const char *s, size_t n);
void tctl_buf_puts(tctl_buf *b, const char *s);
void tctl_buf_free(tctl_buf *b);
/* s as a JSON string literal (quotes, escapes). */
void tctl_jsonl_string(tctl_buf *b, const char *s);
/* numel elements of dt at src (any alignment) shaped dims[0..ndim) as nested JSON lists (one
 * number when ndim is 0): integers as integers, floats with round-trip precision (%.9g for
 * float32), NaN and infinities as null. */
void tctl_jsonl_row(tctl_buf *b, tsd_dtype dt, const void *src, const int64_t *dims, int ndim);

#endif
