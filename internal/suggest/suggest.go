// Package suggest finds the "did you mean" of a mistyped name: the closest candidate by
// edit distance (insertions, deletions, substitutions and swaps of adjacent letters).
package suggest

import "strings"

// Closest returns the candidate nearest to word, or "" when none is near enough: 1 edit
// for a word of 3 or 4 letters, 2 from 5 letters on, none below 3. Letter case is
// ignored; an exact match is no suggestion; ties go to the earlier candidate.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	limit := 0
	switch {
	case len(w) >= 5:
		limit = 2
	case len(w) >= 3:
		limit = 1
	}
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if d := distance(w, strings.ToLower(c)); d < bestDist && d > 0 {
			best, bestDist = c, d
		}
	}
	return best
}

// distance is the optimal string alignment distance between a and b, in bytes.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
