/* The protobuf wire reader shared by the OTLP sources of tracehound._speedups (_speedups.c and
 * _speedups_otlp.c): one field at a time, refusing what upb refuses. */
#ifndef TRACEHOUND_SPEEDUPS_WIRE_H
#define TRACEHOUND_SPEEDUPS_WIRE_H

#include <stdint.h>
#include <string.h>

/* One field read off the wire. */
typedef struct {
    uint32_t num;        /* field number, >= 1 */
    uint32_t wt;         /* wire type: 0, 1, 2 or 5 */
    uint64_t val;        /* wire types 0, 1, 5 */
    const uint8_t *ptr;  /* wire type 2: the payload */
    size_t len;          /* wire type 2: its length */
} field_t;

/* A varint of at most 10 bytes; bits beyond 64 are dropped (as upb does). NULL if malformed. */
static inline const uint8_t *
read_varint_slow(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    int i;
    for (i = 0; i < 10; i++) {
        uint64_t b;
        if (p >= end) {
            return NULL;
        }
        b = *p++;
        v |= (b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return p;
        }
    }
    return NULL;
}

static inline const uint8_t *
read_varint(const uint8_t *p, const uint8_t *end, uint64_t *out)
{
    if (p < end && *p < 0x80) {
        *out = *p;
        return p + 1;
    }
    return read_varint_slow(p, end, out);
}

static inline uint64_t
load_le64(const uint8_t *p)
{
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
           ((uint64_t)p[3] << 24) | ((uint64_t)p[4] << 32) | ((uint64_t)p[5] << 40) |
           ((uint64_t)p[6] << 48) | ((uint64_t)p[7] << 56);
}

static inline uint64_t
load_le32(const uint8_t *p)
{
    return (uint64_t)p[0] | ((uint64_t)p[1] << 8) | ((uint64_t)p[2] << 16) |
           ((uint64_t)p[3] << 24);
}

/*
 * Read one field (tag and value) starting at p < end. Returns the position after it, or NULL
 * for malformed data: a bad or over-long tag (more than 5 bytes or above 32 bits, as upb),
 * field number 0, groups and reserved wire types, a bad varint, a value past the end.
 */
static inline const uint8_t *
read_field(const uint8_t *p, const uint8_t *end, field_t *f)
{
    uint64_t tag, n;
    if (*p < 0x80) {
        tag = *p++;
    }
    else {
        const uint8_t *q = read_varint_slow(p, end, &tag);
        if (q == NULL || q - p > 5 || tag > UINT32_MAX) {
            return NULL;
        }
        p = q;
    }
    f->num = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    f->ptr = NULL;
    f->len = 0;
    if (f->num == 0) {
        return NULL;
    }
    switch (f->wt) {
    case 0:
        return read_varint(p, end, &f->val);
    case 1:
        if (end - p < 8) {
            return NULL;
        }
        f->val = load_le64(p);
        return p + 8;
    case 2:
        p = read_varint(p, end, &n);
        if (p == NULL || n > (uint64_t)(end - p)) {
            return NULL;
        }
        f->val = n;
        f->ptr = p;
        f->len = (size_t)n;
        return p + n;
    case 5:
        if (end - p < 4) {
            return NULL;
        }
        f->val = load_le32(p);
        return p + 4;
    default: /* 3, 4: groups; 6, 7: invalid */
        return NULL;
    }
}

/* Tables of the wire type of each known field, by field number; WT_UNKNOWN for field numbers
 * the message does not define (such fields are skipped). WRONG_WT: a known field arrived with
 * another wire type (upb would treat it as an unknown field; here it makes the answer None). */
#define WT_UNKNOWN (-1)
#define WRONG_WT(table, f) \
    ((f).num < sizeof(table) / sizeof((table)[0]) && (table)[(f).num] != WT_UNKNOWN && \
     (table)[(f).num] != (int8_t)(f).wt)

#endif
