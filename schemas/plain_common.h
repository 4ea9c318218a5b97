/* What the two C files of the compiled line-protocol module share (schemas/plain_lines.c, the
 * block decoder; schemas/plain_pieces.c, reads of a replayed piece's lines). */
#ifndef REFLEX_PLAIN_COMMON_H
#define REFLEX_PLAIN_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bytes that grow: rows, columns and positions, appended to at the end. */
typedef struct {
    char *data;
    Py_ssize_t size, capacity;
} Buffer;

static inline int buffer_reserve(Buffer *b, Py_ssize_t more) {
    if (b->size + more <= b->capacity) return 0;
    Py_ssize_t capacity = b->capacity ? b->capacity : 256;
    while (capacity < b->size + more) capacity *= 2;
    char *data = realloc(b->data, (size_t)capacity);
    if (data == NULL) return -1;
    b->data = data;
    b->capacity = capacity;
    return 0;
}

static inline int buffer_add(Buffer *b, const void *value, Py_ssize_t n) {
    if (b->size + n > b->capacity && buffer_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->size, value, (size_t)n);
    b->size += n;
    return 0;
}

/* A bytearray, so that a numpy view of it is writable. */
static inline PyObject *buffer_bytes(const Buffer *b) {
    return PyByteArray_FromStringAndSize(b->data ? b->data : "", b->size);
}

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

static inline uint64_t fnv1a(const char *s, Py_ssize_t n, uint64_t h) {
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
    return h;
}

/* schemas/plain_pieces.c */
PyObject *plain_line_ends(PyObject *module, PyObject *args);
PyObject *plain_stamps(PyObject *module, PyObject *args);
PyObject *plain_line_heads(PyObject *module, PyObject *args);
PyObject *plain_measured_as(PyObject *module, PyObject *args);

#endif
