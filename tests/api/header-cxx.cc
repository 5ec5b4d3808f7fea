// SPDX-License-Identifier: MIT
// The public headers compile as C++ and link from it.
#include <cuflag/cuflag.h>

int main()
{
	cuflag_client *c = nullptr;
	(void)c;
	return cuflag_version()[0] ? 0 : 1;
}
