/* diskcache_hash.c: the disk cache's hashes: 128-bit entry keys over length-prefixed parts and
 * the 64-bit payload checksum, both from two independent word-at-a-time multiplicative lanes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "diskcache.h"

/* Two lanes with their own seeds, multipliers and rotations; each step is a bijection of the
 * input word for a fixed state, so a single changed word always changes the state. */
typedef struct dc_hash {
	uint64_t a, b, len;
	unsigned char tail[8];
	unsigned ntail;
} dc_hash;

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

/* The murmur3 finalizer: every input bit reaches every output bit. */
static uint64_t fmix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static uint64_t load_le64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void dh_init(dc_hash *h)
{
	memset(h, 0, sizeof(*h));
	h->a = 0xcbf29ce484222325ull; /* FNV-1a's offset basis */
	h->b = 0x6a09e667f3bcc908ull; /* SHA-512's first IV word */
}

static void dh_word(dc_hash *h, uint64_t w)
{
	h->a = rotl64((h->a ^ w) * 0x87c37b91114253d5ull, 27) * 5 + 0x52dce729;
	h->b = rotl64((h->b ^ w) * 0x9e3779b97f4a7c15ull, 31) * 0x4cf5ad432745937full;
}

static void dh_update(dc_hash *h, const void *p, size_t n)
{
	const unsigned char *s = p;
	h->len += n;
	for (; h->ntail && n; n--) {
		h->tail[h->ntail++] = *s++;
		if (h->ntail == 8) {
			dh_word(h, load_le64(h->tail));
			h->ntail = 0;
		}
	}
	for (; n >= 8; n -= 8, s += 8)
		dh_word(h, load_le64(s));
	for (; n; n--)
		h->tail[h->ntail++] = *s++;
}

/* Pads the tail with zeros and appends the length, so zero padding is unambiguous. */
static void dh_final(dc_hash *h, uint64_t out[2])
{
	if (h->ntail) {
		memset(h->tail + h->ntail, 0, 8 - h->ntail);
		dh_word(h, load_le64(h->tail));
	}
	dh_word(h, h->len);
	out[0] = fmix64(h->a);
	out[1] = fmix64(h->b);
}

static void dh_u64(dc_hash *h, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	dh_update(h, b, 8);
}

void eng_diskcache_key(const void *const parts[], const size_t lens[], int nparts, char out[33])
{
	dc_hash h;
	uint64_t r[2];
	dh_init(&h);
	dh_u64(&h, ENG_DISKCACHE_FORMAT);
	for (int i = 0; i < nparts; i++) {
		dh_u64(&h, lens[i]);
		dh_update(&h, parts[i], lens[i]);
	}
	dh_final(&h, r);
	snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, r[0], r[1]);
}

uint64_t eng_diskcache_checksum(const void *bytes, size_t n)
{
	dc_hash h;
	uint64_t r[2];
	dh_init(&h);
	dh_update(&h, bytes, n);
	dh_final(&h, r);
	return r[0] ^ rotl64(r[1], 32);
}
