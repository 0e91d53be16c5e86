/* sockfile.h: the ipc:// and unix:// socket files' claim at start and its removal at exit (sockfile.c): the
 * runtime directory checked, one daemon per socket path, stale files of dead daemons replaced. */
#ifndef DMN_SOCKFILE_H
#define DMN_SOCKFILE_H

#include <stddef.h>

#include "log.h"

/* Before listening on the ipc socket path (its directory exists): the directory must be owned
 * by the daemon's uid or root and not writable by others, nor by its group unless that is the
 * daemon's own with no other member; "<path>.lock" is locked for
 * the life of the process (its descriptor is kept open on purpose: the kernel drops the lock
 * however the daemon ends) with the daemon's pid written in it, so a second daemon on the same
 * path fails here, naming the first's pid; a socket file left at path is looked up in
 * /proc/net/unix (no connect: see sockfile.c): a live listener (not a tensord's) fails the claim,
 * a dead one's file is removed (logged). 0, or -1 with err saying why (naming the path). */
int dmn_sock_claim(const char *path, dmn_logger *log, char *err, size_t errlen);
/* mkdir -p of the socket path's directory (mode 0750 for what it creates): 0, or -1 with
 * errno. */
int dmn_sock_make_dirs(const char *path);
/* A listening TCP socket (non-blocking, close-on-exec, SO_REUSEADDR) on url's HOST:PORT
 * (scheme://HOST:PORT as the config checked it; HOST "*": every address), the first address it
 * resolves to that binds; *port the port bound (the one chosen for 0). The descriptor, or -1
 * with err naming url. */
int dmn_tcp_listen(const char *url, int *port, char *err, size_t errlen);
/* At exit, after the listener closed: remove the socket file at path only when this process
 * holds its lock (a daemon whose claim failed leaves the live one's socket alone). */
void dmn_sock_release(const char *path);

#endif
