/*
 * eng_swap.h - finishing a segment swap that a crash interrupted.
 *
 * The cleaner replaces segments by writing <base>.*.cleaned, renaming them to
 * .swap, renaming the replaced segments to .deleted and finally dropping the
 * .swap suffix.  At startup (kafka-format.md §7): a .swap at or above the
 * smallest .cleaned offset belongs to an unfinished clean and is dropped;
 * every other .swap is completed: the regular segments it covers are removed
 * and the .swap files take their place.
 */
#ifndef ENG_SWAP_H
#define ENG_SWAP_H

/* Completes or discards the swaps in a partition directory. */
int eng_swap_complete(const char *dir);

#endif
