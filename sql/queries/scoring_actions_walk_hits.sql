-- the positions the walk reached: the sequence check's hits. Fields: walk.
select run_id, episode_id, pos, true as hit from {walk} where pos > 0
