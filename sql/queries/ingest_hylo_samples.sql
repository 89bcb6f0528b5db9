-- the validating path's sample rows: each good sample, its episode id defaulted to its key
-- (and epoch after the first), in file and sample order.
SELECT file_idx, run_id, key, task_id, seed, epoch,
       coalesce(episode_id, key || CASE WHEN epoch > 1 THEN '@' || CAST(epoch AS VARCHAR) ELSE '' END) AS episode_id,
       status, trace, sample_idx, extra
FROM _ok ORDER BY file_idx, sample_idx
