/* leftovers.h: the files a killed daemon left behind, removed at start (leftovers.c): saves'
 * temporary files under models_dir, the CPU compiler's scratch directories in $TMPDIR. */
#ifndef DMN_LEFTOVERS_H
#define DMN_LEFTOVERS_H

#include "config.h"
#include "log.h"

/* Before any request runs: remove "<file>.safetensors.tmp.<pid>.<tid>.<n>" under
 * cfg->models_dir (WALK_DEPTH levels, WALK_ENTRIES entries at most, never through a symbolic
 * link) and "$TMPDIR/tensord-cc-<pid>-XXXXXX" directories (TMPDIR unset: /tmp), each only when
 * owned by the daemon's uid and its pid is not alive; each removal logged. Returns how many. */
int dmn_clean_leftovers(const dmn_config *cfg, dmn_logger *log);

#endif
