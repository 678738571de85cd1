// Package descriptors loads and matches rate-limit descriptor configuration in the YAML
// format of envoyproxy/ratelimit, so that the files written for that service load into
// Leash unchanged and select the same limits.
//
// # Format
//
// A file holds one domain:
//
//	domain: edge_proxy_per_ip          # required; must also be a valid Leash namespace
//	descriptors:
//	  - key: remote_address            # required
//	    value: 50.0.0.5                # optional; empty or absent means "any value"
//	    rate_limit:                    # optional
//	      unit: second                 # second, minute, hour, day, week, month, year
//	      requests_per_unit: 0         # 0 ... 1e9; 0 (or absent) denies every request
//	      name: blocked_ip             # optional, for replaces
//	      replaces:                    # optional: the limits named here stop applying
//	        - name: per_ip             # when this one applies to the same request
//	    shadow_mode: false             # optional: count, but never deny
//	    quota_mode: false              # optional: OVER_LIMIT overall only when every quota descriptor is
//	    metadata: {team: payments}     # optional: any mapping, for the replies' dynamic metadata
//	    detailed_metric: false         # optional: per-rule metrics labelled by the request's values (bounded)
//	    value_to_metric: false         # optional: accepted; Leash's metrics do not use it
//	    share_threshold: false         # optional, wildcard values only (see below)
//	    overdraft: true                # optional, Leash's: count the hits of a denial (else the domain's setting)
//	    descriptors: [...]             # optional nested descriptors, same shape
//
// A rate_limit may instead say "unlimited: true" (and then neither unit nor
// requests_per_unit). Unit names are case-insensitive.
//
// Decoding is strict: an unknown key, a key in the wrong place (shadow_mode inside
// rate_limit, say), a value of the wrong type, a duplicate mapping key, an empty
// domain, a descriptor without a key, two descriptors with the same key and value at
// one level, a bad unit, a requests_per_unit out of range (a missing one is 0),
// "unlimited" together with a unit or requests_per_unit, a replaces entry naming a
// limit that no descriptor of the domain defines (or its own limit), and one domain
// in two files are all errors. Every error is an *Error naming the file, the YAML line
// and the path inside it, for example
//
//	ratelimit/config.yaml:9: descriptors[0].descriptors[1].rate_limit.unit: unknown unit "fortnight"
//
// # xDS resources
//
// FromResources builds a Config from xDS RateLimitConfig resources: each is rendered as
// the file of the same content and built by the same code as a file, so it is valid
// exactly when that file would be. Its errors name "xds:" and the resource name in place
// of a file, and no line. Merge combines the files' Config with the resources', refusing
// a domain from both as a domain in two files is refused.
//
// # Extensions
//
// Leash accepts three optional additions; files that do not use them are plain
// envoyproxy/ratelimit files:
//
//   - algorithm, inside a rate limit: fixed_window (the default, and the peer's only
//     behaviour), sliding_window or token_bucket.
//   - unit_multiplier, inside a rate limit: a window of N units (an integer ≥ 1,
//     default 1), the same key and meaning as in recent envoyproxy/ratelimit.
//   - rate_limits, on a descriptor, instead of rate_limit: a list of limits that all
//     apply to the descriptor, e.g. 10 per second and 1000 per hour. Each entry takes
//     unit, requests_per_unit, and optionally name, replaces, algorithm and
//     unit_multiplier. Two entries with the same algorithm and window are an error, and so
//     are more than 8 entries.
//
// A window is the unit's length times unit_multiplier and must not exceed
// engine.MaxWindowMS (366 days).
//
// # Units
//
// Units have fixed lengths, as in the peer: second 1 s, minute 60 s, hour 3600 s,
// day 86400 s, week 7 days, month 30 days, year 365 days.
//
// # Matching
//
// A request descriptor is a list of (key, value) entries. Match walks them one level
// at a time, from the domain's top-level descriptors down. At each level it takes,
// for the entry's key:
//
//  1. the descriptor with exactly the entry's value;
//  2. else a wildcard descriptor whose value matches: a "*" in a configured value
//     matches any run of characters, so "foo*" matches every value that starts with
//     "foo" (a "*" may match no characters); among several matching wildcards the
//     first one written in the file wins;
//  3. else the descriptor with the key and no value, which matches any value.
//
// The walk does not backtrack: once a level has chosen a descriptor, a miss below it
// is a miss. The depths must agree: a request matches only if its last entry lands on
// a descriptor that has a rate_limit (or rate_limits, or unlimited). A request with
// more entries than the configured path, or one that stops at a descriptor with no
// limit of its own, matches nothing. A descriptor with both a limit and nested
// descriptors applies to requests that stop at it, while longer requests go on to
// its children.
//
// Each request value normally identifies its own counter. When a level was matched
// by a wildcard descriptor with share_threshold: true, the configured pattern stands
// in for the request's value in Match.Entries, so every value that matches the
// pattern counts against one shared counter.
//
// # Files and folders
//
// Load and Watch take files and folders. A folder contributes the regular files
// directly inside it (not in subfolders) whose names end in .yaml or .yml (in any
// letter case), in name order. Names starting with "." are skipped: editors' swap
// files, and the "..data" and "..2024_01_01..." entries of a folder mounted from a
// Kubernetes ConfigMap, whose visible files are symbolic links into those hidden
// folders; so each ConfigMap key loads once, through its link. A file named directly
// is read whatever its name. A file reached twice (named twice, or named and inside a
// named folder) is read once. Each file holds one domain; a domain in two files is an
// error (the peer's MERGE_DOMAIN_CONFIG mode is not offered).
//
// Differences from the peer, each deliberate: limits are validated against Leash's
// bounds (requests_per_unit ≤ 1e9, windows ≤ 366 days); keys are checked per
// place rather than against one list of names valid anywhere; a key and a value are
// kept apart, so key "a_b" and key "a" with value "b" do not collide as they do in
// the peer; a
// "*" anywhere in a value is a wildcard (older peer releases honour only a trailing
// one); a "*" in a key is an ordinary character; keys of peer forks are rejected like
// any unknown key (quota_mode is the peer's own and is honoured: spec §9.7).
package descriptors
