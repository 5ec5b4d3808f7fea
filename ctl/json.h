/* SPDX-License-Identifier: MIT */
/*
 * A small JSON writer: enough for cuflagctl's objects of numbers and
 * strings, always valid output (commas tracked, strings escaped).
 */
#ifndef CUFLAGCTL_JSON_H
#define CUFLAGCTL_JSON_H

#include <stdint.h>
#include <stdio.h>

struct json {
	FILE *f;
	int need_comma; /* a value was written at this level */
};

void json_init(struct json *j, FILE *f);

/* key is NULL at the top level and inside arrays, a member name inside objects. */
void json_object_begin(struct json *j, const char *key);
void json_object_end(struct json *j);
void json_array_begin(struct json *j, const char *key);
void json_array_end(struct json *j);
void json_uint(struct json *j, const char *key, uint64_t v);
void json_int(struct json *j, const char *key, int64_t v);
void json_string(struct json *j, const char *key, const char *s);

/* Ends the document with a newline. */
void json_finish(struct json *j);

#endif
