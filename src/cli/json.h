/* json.h - a small JSON reader for the cumemtrace command.
 *
 * json_parse() reads a whole text into a tree of json_value nodes. Every node
 * and every decoded string lives in the document's arena, so one call,
 * json_free(), releases all of it; nothing in the tree is owned separately.
 *
 * Strings are decoded (escapes, \uXXXX with surrogate pairs, into UTF-8) and
 * NUL-terminated; `length` also counts any \u0000 inside. Numbers keep their
 * double value, and integers written without sign, fraction or exponent that
 * fit in 64 bits are also kept exactly (`is_integer`, `integer`): byte counts
 * above 2^53 survive. Objects keep their members in file order; a member's
 * name is in its `key`; a name twice in one object is an error (which one
 * would the reader mean?). Nesting deeper than JSON_MAX_DEPTH is an error, so a
 * hostile file cannot exhaust the stack. Errors name line and column. */
#ifndef CUMEMTRACE_JSON_H
#define CUMEMTRACE_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 256

enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT
};

struct json_value {
    enum json_type type;
    const char *key;  /* member name, when the parent is an object */
    double number;    /* JSON_NUMBER */
    uint64_t integer; /* JSON_NUMBER with is_integer */
    int is_integer;
    const char *string;       /* JSON_STRING, decoded, NUL-terminated */
    size_t length;            /* JSON_STRING bytes; JSON_ARRAY/OBJECT members */
    struct json_value *first; /* JSON_ARRAY/OBJECT: the first member */
    struct json_value *next;  /* the next member of the parent */
};

struct json_chunk;
struct json_document {
    struct json_value *root;
    struct json_chunk *chunks; /* the arena: every node and string */
};

/* Parse `length` bytes of `text`. 0, or -1 with a message such as
 * "line 3, column 7: expected ':' after an object key" in `error`
 * (out of memory also gives -1). Release with json_free in either case. */
int json_parse(const char *text, size_t length, struct json_document *doc, char *error,
               size_t error_size);
/* The same, the members of the root object named in `skip` (NULL-terminated)
 * left out of the tree: passed over with their brackets matched and their
 * strings closed, nothing else checked, no node made (a reader that needs
 * little of a large document). */
int json_parse_skipping(const char *text, size_t length, const char *const *skip,
                        struct json_document *doc, char *error, size_t error_size);
void json_free(struct json_document *doc);
/* `bytes` of the document's arena, for a reader's own use: not zeroed,
 * released by json_free. NULL when out of memory. */
void *json_alloc(struct json_document *doc, size_t bytes);

/* The member `key` of an object; NULL when absent or `object` is not one. */
const struct json_value *json_get(const struct json_value *object, const char *key);
/* The string, or NULL when `value` is not a string. */
const char *json_string(const struct json_value *value);
/* An exact non-negative integer: 0, or -1 when `value` is not one. */
int json_uint(const struct json_value *value, uint64_t *out);
/* Any number (true for JSON_NUMBER); -1 when `value` is not a number. */
int json_number(const struct json_value *value, double *out);

#endif
