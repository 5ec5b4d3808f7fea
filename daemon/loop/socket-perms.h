/* SPDX-License-Identifier: MIT */
/* Who may reach the socket cuflagd makes itself (without socket activation):
 * its group and mode, and the directory it makes for it. */
#ifndef CUFLAGD_SOCKET_PERMS_H
#define CUFLAGD_SOCKET_PERMS_H

#include "base/config.h"

/* Make path's directory when it does not exist: 0755, or with
 * --socket-group owned by that group and 0750 (0755 when --socket-mode lets
 * others in), so that the socket's members can enter it. A directory that
 * exists is left as it is, with a warning if the group cannot enter it. */
void socket_dir_make(const char *path, const struct cuflagd_config *cfg);

/* The umask that makes bind(2) create the socket with --socket-mode. */
unsigned socket_umask(const struct cuflagd_config *cfg);

/* Give the socket at path its --socket-group (before listen(2): nobody
 * connects until it is whole). 0 or a negative errno. */
int socket_own(const char *path, const struct cuflagd_config *cfg);

#endif
