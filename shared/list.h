/* SPDX-License-Identifier: MIT */
/*
 * Intrusive doubly-linked lists, NULL at both ends, after systemd's
 * LIST_FIELDS: an item holds its links to its neighbours (LIST_FIELDS(type,
 * name) makes name_prev and name_next), its owner the list's first item and,
 * for a list appended to, its last. Zeroed memory is an empty list and an
 * item on none.
 *
 * Every link and unlink asserts what it relies on: an item linked is on no
 * list, an item unlinked is where its neighbours (or the list's ends) say it
 * is. An item unlinked twice, or from the wrong list, fails there instead of
 * cutting the list somewhere else. Unlinked, an item's links are NULL again.
 */
#ifndef CUFLAG_LIST_H
#define CUFLAG_LIST_H

#include <assert.h>

#define LIST_FIELDS(type, name) type *name##_prev, *name##_next

/* Whether item is on the list starting at first (an item on no list has no
 * neighbour and is no list's first). */
#define LIST_LINKED(name, first, item) ((item)->name##_prev || (first) == (item))

/* item, on no list, becomes the first of the list starting at first. */
#define LIST_PREPEND(name, first, item)                                                    \
	do {                                                                               \
		__typeof__(item) li_ = (item);                                             \
		assert(!li_->name##_prev && !li_->name##_next && (first) != li_);          \
		li_->name##_next = (first);                                                \
		if (li_->name##_next)                                                      \
			li_->name##_next->name##_prev = li_;                                \
		(first) = li_;                                                             \
	} while (0)

/* item, on no list, becomes the last of the list (first, last). */
#define LIST_APPEND(name, first, last, item)                                               \
	do {                                                                               \
		__typeof__(item) li_ = (item);                                             \
		assert(!li_->name##_prev && !li_->name##_next && (first) != li_);          \
		li_->name##_prev = (last);                                                 \
		if (li_->name##_prev)                                                      \
			li_->name##_prev->name##_next = li_;                                \
		else                                                                       \
			(first) = li_;                                                     \
		(last) = li_;                                                              \
	} while (0)

/* item out of the list starting at first, which it is on. */
#define LIST_REMOVE(name, first, item)                                                     \
	do {                                                                               \
		__typeof__(item) li_ = (item);                                             \
		if (li_->name##_next) {                                                    \
			assert(li_->name##_next->name##_prev == li_);                        \
			li_->name##_next->name##_prev = li_->name##_prev;                    \
		}                                                                          \
		if (li_->name##_prev) {                                                    \
			assert(li_->name##_prev->name##_next == li_);                        \
			li_->name##_prev->name##_next = li_->name##_next;                    \
		} else {                                                                   \
			assert((first) == li_);                                            \
			(first) = li_->name##_next;                                        \
		}                                                                          \
		li_->name##_prev = li_->name##_next = NULL;                                \
	} while (0)

/* item out of the list (first, last), which it is on. */
#define LIST_REMOVE_LAST(name, first, last, item)                                          \
	do {                                                                               \
		__typeof__(item) lj_ = (item);                                             \
		if (!lj_->name##_next) {                                                   \
			assert((last) == lj_);                                             \
			(last) = lj_->name##_prev;                                         \
		}                                                                          \
		LIST_REMOVE(name, first, lj_);                                             \
	} while (0)

#endif
