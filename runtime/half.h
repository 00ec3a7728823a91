/* half.h — fp16 and bf16 conversions on the host (round to nearest even, NaN kept). */
#ifndef TAILOR_HALF_H
#define TAILOR_HALF_H

#include <stdint.h>
#include <string.h>

static inline float tailor_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t tailor_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float tailor_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while ((man & 0x400u) == 0);
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t tailor_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (absu >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (absu < 0x38800000u) { /* below the smallest normal: subnormal or zero */
        if (absu < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = absu >> 23;
        uint32_t man = (absu & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t r = absu + 0xfffu + ((absu >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

/* Rounds a float through bf16 or fp16 and back (the value a 16-bit store would hold). */
static inline float tailor_round_bf16(float f) { return tailor_bf16_to_f32(tailor_f32_to_bf16(f)); }
static inline float tailor_round_f16(float f) { return tailor_f16_to_f32(tailor_f32_to_f16(f)); }

#endif
