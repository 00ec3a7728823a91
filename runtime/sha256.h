/* sha256.h — SHA-256 (FIPS 180-4), for template hashes and export checksums. */
#ifndef TAILOR_SHA256_H
#define TAILOR_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct tailor_sha256 {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t buf[64];
    size_t used;
} tailor_sha256;

void tailor_sha256_init(tailor_sha256 *s);
void tailor_sha256_update(tailor_sha256 *s, const void *data, size_t n);
void tailor_sha256_final(tailor_sha256 *s, uint8_t out[32]);

/* One-shot digest as 64 lowercase hex characters plus NUL. */
void tailor_sha256_hex(const void *data, size_t n, char hex[65]);

/* 32-byte digest to hex. */
void tailor_sha256_to_hex(const uint8_t digest[32], char hex[65]);

#endif
