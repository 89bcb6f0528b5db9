-- json_merge_patch drops null members, so absent optional fields stay absent; the scores
-- object (whose null members are abstentions) is appended after the patch.
-- {{scores}}: the query export_scores; $prefix: the run's folder, inlined as a literal
WITH smp AS (
    SELECT *, count(*) OVER (PARTITION BY key) AS n_key FROM stg_samples WHERE run_id = $run
), sc AS ({scores}), j AS (
    SELECT smp.key, smp.epoch, smp.task_id, smp.seed, smp.status, smp.episode_id,
           CASE WHEN starts_with(smp.trace_path, $prefix)
                THEN substr(smp.trace_path, length($prefix) + 1) END AS trace,
           CAST(json_merge_patch(coalesce(smp.extra, '{{}}'), json_object(
               'key', smp.key, 'task_id', smp.task_id, 'seed', smp.seed,
               'epoch', CASE WHEN smp.n_key > 1 OR smp.epoch <> 1 THEN smp.epoch END,
               -- ingest names an unnamed episode '<key>' (epoch 1) or '<key>@<epoch>'
               'episode_id', CASE WHEN smp.episode_id <> smp.key || CASE WHEN smp.epoch > 1
                   THEN '@' || CAST(smp.epoch AS VARCHAR) ELSE '' END THEN smp.episode_id END,
               'status', smp.status,
               'trace', CASE WHEN starts_with(smp.trace_path, $prefix)
                             THEN substr(smp.trace_path, length($prefix) + 1) END
           )) AS VARCHAR) AS body,
           sc.scores, smp.extra
    FROM smp LEFT JOIN sc ON sc.key = smp.key AND sc.epoch = smp.epoch
)
SELECT * FROM j ORDER BY key, epoch
