-- 0005: reserved for a change made alongside 0006; it changes nothing.
SELECT 1;
