-- step 3, then: the expected actions of an episode that abstains are not scored. Fields: ep,
-- exp.
delete from {exp} where (run_id, episode_id) in
    (select run_id, episode_id from {ep} where why is not null)
