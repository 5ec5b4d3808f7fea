/* SPDX-License-Identifier: MIT */
#include "proc-cpu.h"

#include <dirent.h>
#include <stdio.h>

int64_t proc_cpu_ns(pid_t pid)
{
	char path[96];
	struct dirent *e;
	int64_t total = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir))) {
		unsigned long long run = 0;
		char p[160];
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%.16s/schedstat", (int)pid, e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue; /* a thread that just ended */
		if (fscanf(f, "%llu", &run) == 1)
			total += (int64_t)run;
		fclose(f);
	}
	closedir(dir);
	return total;
}
