-- the expected positions met: by any matching call (selection, arguments: at is true), or by
-- the call at the same position (exact_sequence: at is m.cpos = m.pos). Fields: matched, at.
select distinct m.run_id, m.episode_id, m.pos, true as hit from {matched} as m
where {at}
