#!/usr/bin/env python3
"""A model of a large fleet on S3, fed with what the fleet bench measures per request.

    scripts/fleet-model.py [--hosts 10000] [--sessions-per-day 1000000] [--ship-interval 1]

What one session and one host cost in requests follows from the shipper's rules (see
src/fleet/shipper.rs): one part per ship interval while a file has new bytes, one lease record
when a session is taken, one per third of --lease-ttl while it is held, one when it is given
back, one compacted object (and deletes, which S3 does not charge) when a segment closes, a
host's catalog shipped like a file. Request latencies are S3's published typical first-byte
times (tens of ms), not this machine's loopback. Prices: S3 Standard list prices (us-east-1).
"""
import argparse

PUT = 0.005 / 1000  # $ per PUT/COPY/POST/LIST request
GET = 0.0004 / 1000  # $ per GET
STORAGE = 0.023  # $ per GB-month
S3_MS = 30  # typical first-byte latency of one S3 request, ms
IN_FLIGHT = 16  # requests a reader keeps in flight (src/fleet/pull.rs, from_store.rs)

p = argparse.ArgumentParser()
p.add_argument("--hosts", type=int, default=10_000)
p.add_argument("--sessions-per-day", type=int, default=1_000_000)
p.add_argument("--ship-interval", type=float, default=1.0)
p.add_argument("--lease-ttl", type=float, default=15.0)
# A session as the adapters' users have them: 30 turns over 40 minutes, each turn streaming
# updates for 30 s; journal bytes per session from the bench (37 B per message on disk, about
# 150 messages a turn).
p.add_argument("--turns", type=int, default=30)
p.add_argument("--streaming-s", type=float, default=30.0)
p.add_argument("--session-minutes", type=float, default=40.0)
p.add_argument("--bytes-per-session", type=float, default=30 * 150 * 37)
# Before issue 50, a new session's lease took three listings of its key's objects and two reads
# before its two writes.
p.add_argument("--before-issue-50", action="store_true")
a = p.parse_args()

writing_s = a.turns * a.streaming_s
part_puts = writing_s / a.ship_interval  # session segment: one part per interval with new bytes
conn_puts = part_puts  # its run's connection segment grows in the same intervals (one per host
# process, shared by its sessions: counted per session as an upper bound)
# The lease: taken as a new session's (the lease created if absent, its epoch record: two PUTs,
# no listing; before issue 50 also three listings, priced as PUTs, and two GETs), renewed every
# third of the TTL while held, given back.
take_puts = 2 + (3 if a.before_issue_50 else 0)
take_gets = 2 if a.before_issue_50 else 0
lease_puts = take_puts + a.session_minutes * 60 / (a.lease_ttl / 3) + 1
close_puts = 1 + 1  # compaction + the epoch marker
per_session = part_puts + conn_puts + lease_puts + close_puts
# A host's catalog changes at most once a second (facts coalesced), while any of its sessions
# streams: the fleet's writing seconds spread over its hosts, capped at a day.
day = 86_400
busy_s = min(day, a.sessions_per_day * writing_s / a.hosts)
catalog_puts = a.hosts * busy_s / a.ship_interval

puts = a.sessions_per_day * per_session + catalog_puts
gets = a.sessions_per_day * take_gets
objects_kept = a.sessions_per_day * (2 + 1)  # compacted session + connection parts, one lease
gb_month = a.sessions_per_day * 30 * a.bytes_per_session * 2 / 1e9

print(f"hosts {a.hosts}, sessions/day {a.sessions_per_day}, ship interval {a.ship_interval} s")
print(f"requests per session: {per_session:,.0f} PUT (parts {part_puts:,.0f} + connection "
      f"{conn_puts:,.0f} + lease {lease_puts:,.0f} + close {close_puts})")
print(f"catalog PUTs per day: {catalog_puts:,.0f}")
print(f"PUTs per day: {puts:,.0f} = ${puts * PUT:,.0f}/day; lease GETs per day: {gets:,.0f}")
print(f"objects kept per day: {objects_kept:,.0f}; storage after 30 days: {gb_month:,.1f} GB "
      f"= ${gb_month * STORAGE:,.2f}/month")
lists = a.hosts / 1000 + 1  # LIST hosts/ (1000 a page), then per host: LIST + GET
list_s = (lists * S3_MS + a.hosts * 2 * S3_MS / IN_FLIGHT) / 1000
print(f"list over the fleet (cold): {a.hosts * 2 + lists:,.0f} requests, ~{list_s:,.1f} s; "
      f"${(a.hosts * GET + a.hosts * PUT):.3f} per cold list")
load_ms = 2 * S3_MS + 3 * S3_MS + (1 + 1) * S3_MS  # LIST + GET parts | lease LIST+GET+PUT | 2 segments
print(f"load of a closed session on another host: ~{load_ms} ms of requests + the replay")

# The team index (src/fleet/index): each host writes what its sessions did every 8 s while turns
# end (a sessions part, a turns part, a postings part, a manifest commit), parts merged by 8.
index_flushes = min(day, busy_s) / 8
index_puts = a.hosts * index_flushes * (3 + 1) * (1 + 1 / 8)
# Its upkeep (issue 50): every 30 s each host reads the compaction lease (a GET); the host holding
# it renews it every third of the TTL, and reads the manifest, lists the hosts' catalogs and the
# index, and reads the sessions table (one part a day, compacted) to find what to repair.
upkeep_gets = a.hosts * day / 30 + (day / 30) * (1 + 30)
upkeep_puts = day / (a.lease_ttl / 3) + (day / 30) * (1 + max(1, a.hosts // 1000))
# Its size, from the bench: a turn row ~300 B compressed, a session's words ~2 KiB of postings.
index_gb = a.sessions_per_day * 30 * (a.turns * 300 + 2048) / 1e9
print(f"index PUTs per day: {index_puts:,.0f} = ${index_puts * PUT:,.0f}/day; "
      f"index after 30 days: {index_gb:,.1f} GB")
print(f"index upkeep per day: {upkeep_gets:,.0f} GETs + {upkeep_puts:,.0f} PUT/LIST = "
      f"${upkeep_gets * GET + upkeep_puts * PUT:,.2f}/day")
# A teammate's list: the manifest, then the sessions parts (compacted: one per day), and every
# host's catalog to check the index against (issue 50: one listing per thousand catalog parts,
# and the parts new since the reader's last look — warm, those of the hosts busy since; cold, a
# few per host, counted as one); a search: the same, then per postings part a footer and a row
# group or two, then the sessions found.
days = 30
catalog_lists = max(1, a.hosts * 3 // 1000)
list_requests = 1 + days + catalog_lists
cold_list_requests = list_requests + a.hosts
search_requests = 1 + 3 * max(1, a.hosts // 1000) + 10
print(f"from the index: a cold list {cold_list_requests:,} requests (~{cold_list_requests * S3_MS / IN_FLIGHT / 1000 + S3_MS / 1000:.1f} s: "
      f"every host's catalog read once), a warm list {list_requests} requests and the hosts' new catalog parts "
      f"(~{list_requests * S3_MS / IN_FLIGHT / 1000 + S3_MS / 1000:.1f} s), "
      f"a search {search_requests} requests and the sessions it finds (~{(search_requests * S3_MS / IN_FLIGHT + S3_MS) / 1000:.2f} s)")
