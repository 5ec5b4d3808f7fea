/* SPDX-License-Identifier: MIT */
/*
 * A plain driver for one fuzz harness, for compilers without libFuzzer: runs
 * LLVMFuzzerTestOneInput over every file in the corpus directories given,
 * then over inputs made by mutating them with a fixed-seed generator, so
 * that every run tries the same inputs.
 *
 * Usage: fuzz-main [-n COUNT] DIR...
 */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#define FUZZ_INPUT_MAX 8192
#define MAX_CORPUS 1024

struct input {
	uint8_t *data;
	size_t size;
};

static struct input corpus[MAX_CORPUS];
static unsigned ncorpus;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* xorshift64*: deterministic, good enough to pick mutations. */
static uint64_t next(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static uint64_t below(uint64_t n)
{
	return n ? next() % n : 0;
}

static void load_dir(const char *dir)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, alphasort); /* sorted: the same order each run */

	if (n < 0) {
		perror(dir);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		free(names[i]);
		if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > FUZZ_INPUT_MAX)
			continue;
		if (ncorpus == MAX_CORPUS)
			continue;
		f = fopen(path, "rb");
		if (!f) {
			perror(path);
			exit(1);
		}
		struct input *in = &corpus[ncorpus++];
		in->size = (size_t)st.st_size;
		in->data = malloc(in->size ? in->size : 1);
		if (!in->data || fread(in->data, 1, in->size, f) != in->size) {
			fprintf(stderr, "%s: cannot read\n", path);
			exit(1);
		}
		fclose(f);
		/* A file on its own, exactly as it is. */
		LLVMFuzzerTestOneInput(in->data, in->size);
	}
	free(names);
}

/* Values that sit on the edges of every check. */
static const uint32_t interesting[] = {
	0, 1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 63, 64, 65, 127, 128, 255, 256, 4095, 4096,
	4097, 0x7fff, 0x8000, 0x8001, 0xffff, 0x10000, 0x40000000, 0x40000002, 0x7fffffff,
	0x80000000, 0xfffffffe, 0xffffffff,
};

static size_t mutate(uint8_t *buf, size_t size)
{
	unsigned rounds = 1 + (unsigned)below(6);

	for (unsigned r = 0; r < rounds; r++) {
		switch (below(8)) {
		case 0: /* flip a bit */
			if (size)
				buf[below(size)] ^= (uint8_t)(1u << below(8));
			break;
		case 1: /* a random byte */
			if (size)
				buf[below(size)] = (uint8_t)next();
			break;
		case 2:
		case 3: { /* an edge value at an aligned offset */
			uint32_t v = interesting[below(sizeof(interesting) / sizeof(interesting[0]))];
			size_t at = size >= 4 ? below(size / 4) * 4 : 0;
			if (below(4) == 0)
				v = (uint32_t)next();
			if (at + 4 <= size)
				memcpy(buf + at, &v, 4);
			break;
		}
		case 4: /* shorter */
			if (size)
				size = below(size + 1);
			break;
		case 5: { /* longer */
			size_t add = 1 + below(64);
			if (size + add <= FUZZ_INPUT_MAX) {
				for (size_t i = 0; i < add; i++)
					buf[size + i] = (uint8_t)next();
				size += add;
			}
			break;
		}
		case 6: { /* splice from another input */
			const struct input *o = &corpus[below(ncorpus)];
			if (o->size && size) {
				size_t from = below(o->size), to = below(size);
				size_t n = 1 + below(16);
				if (from + n > o->size)
					n = o->size - from;
				if (to + n > size)
					n = size - to;
				memcpy(buf + to, o->data + from, n);
			}
			break;
		}
		default: /* the last byte (the harnesses' fd count or page choice) */
			if (size)
				buf[size - 1] = (uint8_t)below(8);
			break;
		}
	}
	return size;
}

int main(int argc, char **argv)
{
	static uint8_t buf[FUZZ_INPUT_MAX + 64];
	unsigned long count = 200000;
	int i = 1;

	if (argc > 2 && !strcmp(argv[1], "-n")) {
		count = strtoul(argv[2], NULL, 10);
		i = 3;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: %s [-n COUNT] DIR...\n", argv[0]);
		return 2;
	}
	for (; i < argc; i++)
		load_dir(argv[i]);
	if (!ncorpus) {
		fprintf(stderr, "empty corpus\n");
		return 1;
	}
	for (unsigned long k = 0; k < count; k++) {
		const struct input *in = &corpus[below(ncorpus)];
		size_t size = in->size;
		memcpy(buf, in->data, size);
		size = mutate(buf, size);
		/* An exact-size copy, so that a read past the end is a read past the end. */
		uint8_t *exact = malloc(size ? size : 1);
		if (!exact)
			return 1;
		memcpy(exact, buf, size);
		LLVMFuzzerTestOneInput(exact, size);
		free(exact);
	}
	printf("%u corpus files and %lu mutated inputs: no crash, no broken invariant\n",
	       ncorpus, count);
	return 0;
}
