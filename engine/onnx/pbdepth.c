/* pbdepth.c: a bound on how deeply an untrusted protobuf nests its messages, checked before
 * protobuf-c unpacks it (its unpacker recurses once per level: a small file nested a million
 * deep would exhaust the stack). Guided by the generated descriptors, so only real submessage
 * fields count. */
#include <stdint.h>

#include "onnx_int.h"

static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;
	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;
}

bool onx_pb_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, int depth_left)
{
	const uint8_t *end = p + len;
	while (p < end) {
		uint64_t key, v;
		if (!varint(&p, end, &key))
			return true; /* malformed: the unpacker reports it */
		unsigned wt = (unsigned)(key & 7);
		uint64_t tag = key >> 3;
		if (wt == 0) {
			if (!varint(&p, end, &v))
				return true;
		} else if (wt == 1 || wt == 5) {
			size_t k = wt == 1 ? 8 : 4;
			if ((size_t)(end - p) < k)
				return true;
			p += k;
		} else if (wt == 2) {
			if (!varint(&p, end, &v) || v > (uint64_t)(end - p))
				return true;
			const ProtobufCFieldDescriptor *f = tag <= UINT32_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)tag) : NULL;
			if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				if (depth_left <= 0 || !onx_pb_depth_ok(f->descriptor, p, (size_t)v, depth_left - 1))
					return false;
			}
			p += v;
		} else
			return true;
	}
	return true;
}
