"""Study records: what a study's conditions leave on disk (`condition_files`) and what is read from
a run after it trained (`onset`). Below `study/` and `report/`; imports neither."""
