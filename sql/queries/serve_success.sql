-- each run's success metric (success_at_end for inspect-robots) under the three policies: its
-- harness's convention (errors), errors as failures and errors excluded, each with its Wilson
-- interval on its own denominator (mart_success_rates), and the coverage of each
SELECT run_id, errors, n_total, n_errors,
       success_rate, ci_low, ci_high, n_valid / n_total AS coverage,
       success_rate_errors_as_failures, errors_as_failures_ci_low, errors_as_failures_ci_high,
       CASE WHEN success_rate_errors_as_failures IS NOT NULL
            THEN (n_total - n_skipped_other) / n_total
            ELSE (n_total - n_skipped_other - n_errors) / n_total END AS coverage_as_failures,
       success_rate_errors_excluded, errors_excluded_ci_low, errors_excluded_ci_high,
       (n_total - n_skipped_other - n_errors) / n_total AS coverage_excluded
FROM mart_success_rates
