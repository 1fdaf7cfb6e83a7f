-- v7: a failed attempt keeps its traceback (issue 17): the formatted exception, bounded by the
-- worker (its end kept). NULL for successes and for attempts recorded before now.
ALTER TABLE attempts ADD COLUMN traceback TEXT;
