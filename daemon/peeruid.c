/* peeruid.c: the uid behind a loopback tcp peer, from the kernel's socket table
 * (/proc/net/tcp, /proc/net/tcp6): the peer's own socket is the entry whose local address is
 * the peer's and whose remote address is ours, and the table gives its owner's uid. Not a
 * credential (tcp carries none): used only to keep system shared memory to what the caller
 * could map itself (verbs_sysshm.c). */
#include "peeruid.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* addr:port as the table prints it: the address's 32-bit words as stored, in hex, then the
 * port in host order. */
static bool hex_of(const struct sockaddr *a, char *out, size_t cap)
{
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
		snprintf(out, cap, "%08X:%04X", (unsigned)v4->sin_addr.s_addr, (unsigned)ntohs(v4->sin_port));
		return true;
	}
	if (a->sa_family == AF_INET6) {
		const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a;
		uint32_t w[4];
		memcpy(w, &v6->sin6_addr, 16);
		snprintf(out, cap, "%08X%08X%08X%08X:%04X", (unsigned)w[0], (unsigned)w[1], (unsigned)w[2], (unsigned)w[3],
			 (unsigned)ntohs(v6->sin6_port));
		return true;
	}
	return false;
}

/* a v4 address as the v4-mapped v6 one (::ffff:a.b.c.d): how a dual-stack v6 socket's table
 * entry shows a v4 connection */
static struct sockaddr_in6 mapped(const struct sockaddr *a)
{
	const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
	struct sockaddr_in6 m = {.sin6_family = AF_INET6, .sin6_port = v4->sin_port};
	m.sin6_addr.s6_addr[10] = m.sin6_addr.s6_addr[11] = 0xff;
	memcpy(&m.sin6_addr.s6_addr[12], &v4->sin_addr, 4);
	return m;
}

static bool lookup(const struct sockaddr *peer, const struct sockaddr *local, uint32_t *uid)
{
	char want_l[64], want_r[64];
	if (!hex_of(peer, want_l, sizeof(want_l)) || !hex_of(local, want_r, sizeof(want_r)))
		return false;
	FILE *f = fopen(peer->sa_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "r");
	if (!f)
		return false;
	char line[512], l[64], r[64];
	unsigned u;
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		/* sl local rem st tx:rx tr:when retrnsmt uid ... */
		if (sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %u", l, r, &u) == 3 && !strcmp(l, want_l) &&
		    !strcmp(r, want_r)) {
			*uid = u;
			found = true;
		}
	fclose(f);
	return found;
}

bool dmn_tcp_peer_uid(const struct sockaddr *peer, const struct sockaddr *local, uint32_t *uid)
{
	if (lookup(peer, local, uid))
		return true;
	if (peer->sa_family != AF_INET || local->sa_family != AF_INET)
		return false;
	/* a client's dual-stack v6 socket that dialled a v4 address (gRPC's) is in tcp6 */
	struct sockaddr_in6 p6 = mapped(peer), l6 = mapped(local);
	return lookup((const struct sockaddr *)&p6, (const struct sockaddr *)&l6, uid);
}
