/* nc_sha256.h — SHA-256 (FIPS 180-4), to fingerprint the source model a
 * project was converted from.  Small and dependency-free on purpose. */
#ifndef NC_SHA256_H
#define NC_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "nc_status.h"

typedef struct nc_sha256 {
    uint32_t h[8];
    uint64_t length;     /* bytes hashed so far */
    uint8_t block[64];
    size_t used;         /* bytes waiting in block */
} nc_sha256;

void nc_sha256_init(nc_sha256 *s);
void nc_sha256_update(nc_sha256 *s, const void *data, size_t size);
void nc_sha256_final(nc_sha256 *s, uint8_t digest[32]);

/* One-shot digest as 64 lowercase hex digits + NUL. */
void nc_sha256_hex(const void *data, size_t size, char hex[65]);
/* Digest of a file's contents as hex; NC_ERR_IO names the file. */
nc_status nc_sha256_file(const char *path, char hex[65], nc_error *err);

#endif
