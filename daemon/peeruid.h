/* peeruid.h: the uid behind a loopback tcp peer (peeruid.c), for system shared memory. */
#ifndef DMN_PEERUID_H
#define DMN_PEERUID_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* The uid owning a loopback tcp peer's socket (peer: its address; local: ours on that
 * connection), from /proc/net/tcp[6]; false when not found (not on this host, or gone). */
bool dmn_tcp_peer_uid(const struct sockaddr *peer, const struct sockaddr *local, uint32_t *uid);

#endif
