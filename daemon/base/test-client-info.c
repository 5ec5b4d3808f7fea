/* SPDX-License-Identifier: MIT */
/* Who a client is, from its cgroup path and process name (daemon/base/client-info.c). */
#undef NDEBUG
#include <check.h>
#include <string.h>
#include <unistd.h>

#include "base/client-info.h"
#include "unit-run.h"

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static struct client_ident parse(const char *path)
{
	struct client_ident ci;

	memset(&ci, 0x55, sizeof(ci));
	client_ident_parse_cgroup(&ci, path);
	return ci;
}

START_TEST(test_systemd_service)
{
	struct client_ident ci = parse("/system.slice/inference.service");
	ck_assert_str_eq(ci.unit, "inference.service");
	ck_assert_str_eq(ci.pod, "");
	ck_assert_str_eq(ci.container, "");
	ck_assert_str_eq(ci.cgroup, "/system.slice/inference.service");
	/* A user's session and a user's app: the innermost unit. */
	ci = parse("/user.slice/user-1000.slice/user@1000.service/app.slice/app-x-1.scope");
	ck_assert_str_eq(ci.unit, "app-x-1.scope");
	ci = parse("/user.slice/user-1000.slice/session-3.scope");
	ck_assert_str_eq(ci.unit, "session-3.scope");
	ci = parse("/");
	ck_assert_str_eq(ci.unit, "");
}
END_TEST

START_TEST(test_kubernetes)
{
	/* The systemd cgroup driver: '_' for '-' in the pod's UID. */
	struct client_ident ci = parse(
		"/kubepods.slice/kubepods-burstable.slice/"
		"kubepods-burstable-pod1f2e3d4c_5b6a_4789_8abc_def012345678.slice/"
		"cri-containerd-" ID64 ".scope");
	ck_assert_str_eq(ci.pod, "1f2e3d4c-5b6a-4789-8abc-def012345678");
	ck_assert_str_eq(ci.container, "0123456789ab");
	ck_assert_str_eq(ci.unit, "");
	/* Guaranteed QoS, crio. */
	ci = parse("/kubepods.slice/kubepods-pod1f2e3d4c_5b6a_4789_8abc_def012345678.slice/"
		   "crio-" ID64 ".scope");
	ck_assert_str_eq(ci.pod, "1f2e3d4c-5b6a-4789-8abc-def012345678");
	ck_assert_str_eq(ci.container, "0123456789ab");
	/* The cgroupfs driver. */
	ci = parse("/kubepods/besteffort/pod1f2e3d4c-5b6a-4789-8abc-def012345678/" ID64);
	ck_assert_str_eq(ci.pod, "1f2e3d4c-5b6a-4789-8abc-def012345678");
	ck_assert_str_eq(ci.container, "0123456789ab");
}
END_TEST

START_TEST(test_containers)
{
	struct client_ident ci = parse("/system.slice/docker-" ID64 ".scope");
	ck_assert_str_eq(ci.container, "0123456789ab");
	ck_assert_str_eq(ci.unit, "");
	ci = parse("/machine.slice/libpod-" ID64 ".scope/container");
	ck_assert_str_eq(ci.container, "0123456789ab");
	/* podman's conmon is no container; a short hex name is none either. */
	ci = parse("/machine.slice/libpod-conmon-" ID64 ".scope");
	ck_assert_str_eq(ci.container, "");
	ck_assert_uint_eq(strlen(ci.unit), sizeof(ci.unit) - 1); /* cut to fit */
	ck_assert(!strncmp(ci.unit, "libpod-conmon-0123", 18));
	ci = parse("/docker-abc.scope");
	ck_assert_str_eq(ci.container, "");
}
END_TEST

/* Untrusted text: bounded, printable ASCII, no quote or backslash. */
START_TEST(test_hostile_paths)
{
	char longp[600];
	struct client_ident ci;
	char out[16];

	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = 0;
	ci = parse(longp);
	ck_assert_uint_eq(strlen(ci.cgroup), sizeof(ci.cgroup) - 1);
	ci = parse("/x.slice/evil\"\\\x1b[31m\xff.service");
	ck_assert_str_eq(ci.unit, "evil___[31m_.service");
	ck_assert(!strchr(ci.cgroup, '"') && !strchr(ci.cgroup, '\\'));
	/* A pod UID that is no UID is not taken. */
	ci = parse("/kubepods/pod\"; drop/" ID64);
	ck_assert_str_eq(ci.pod, "");
	client_ident_clean(out, sizeof(out), "python3\n", 8);
	ck_assert_str_eq(out, "python3");
	client_ident_clean(out, sizeof(out), "a-very-long-process-name", 24);
	ck_assert_str_eq(out, "a-very-long-pro");
}
END_TEST

/* This very process, read as the daemon reads a peer. */
START_TEST(test_read_self)
{
	struct client_ident ci;

	client_ident_read(&ci, -1, getpid());
	ck_assert_str_eq(ci.comm, "test-client-inf");
	client_ident_read(&ci, -1, 0);
	ck_assert_str_eq(ci.comm, "");
}
END_TEST

int main(void)
{
	const TTest *const tests[] = { test_systemd_service, test_kubernetes, test_containers,
				       test_hostile_paths,   test_read_self,  NULL };
	return unit_run("client-info", tests);
}
