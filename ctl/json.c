/* SPDX-License-Identifier: MIT */
#include "json.h"

#include <inttypes.h>

void json_init(struct json *j, FILE *f)
{
	j->f = f;
	j->need_comma = 0;
}

static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* What comes before any value: the comma, then the member name. */
static void prefix(struct json *j, const char *key)
{
	if (j->need_comma)
		fputc(',', j->f);
	if (key) {
		put_string(j->f, key);
		fputc(':', j->f);
	}
	j->need_comma = 1;
}

/* Objects and arrays open and close alike; only the bracket differs. */
static void open_with(struct json *j, const char *key, char bracket)
{
	prefix(j, key);
	fputc(bracket, j->f);
	j->need_comma = 0;
}

static void close_with(struct json *j, char bracket)
{
	fputc(bracket, j->f);
	j->need_comma = 1;
}

void json_object_begin(struct json *j, const char *key)
{
	open_with(j, key, '{');
}

void json_object_end(struct json *j)
{
	close_with(j, '}');
}

void json_array_begin(struct json *j, const char *key)
{
	open_with(j, key, '[');
}

void json_array_end(struct json *j)
{
	close_with(j, ']');
}

void json_uint(struct json *j, const char *key, uint64_t v)
{
	prefix(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void json_int(struct json *j, const char *key, int64_t v)
{
	prefix(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void json_string(struct json *j, const char *key, const char *s)
{
	prefix(j, key);
	put_string(j->f, s);
}

void json_finish(struct json *j)
{
	fputc('\n', j->f);
	j->need_comma = 0;
}
