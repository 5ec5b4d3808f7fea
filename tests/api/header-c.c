/* SPDX-License-Identifier: MIT */
/* The public header alone compiles (built as C99 and as C11). */
#include <cuflag/cuflag.h>

int main(void)
{
	cuflag_client *c = 0;
	cuflag_slot *s = 0;
	(void)c;
	(void)s;
	return cuflag_version()[0] ? 0 : 1;
}
