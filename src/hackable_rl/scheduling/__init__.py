"""Running many stages or seeds side by side: `lanes` (a study's outdated DVC stages, each a Ray task
from `ray_cells`, recorded in dvc.lock as it ends) and `seeds` (one `hackable-rl` process per
training seed, without DVC).

Two schedulers for two jobs: `lanes` runs a study's cells and replicates as DVC stages (the run
cache, dvc.lock, a Ray cluster when one is given); `seeds` runs any one command for several seeds
with no DVC project at all (`hackable-rl seeds 0 1 2 -- train ...`), so it cannot hand its work to
DVC's stages. Neither imports the science: they start commands.
"""
