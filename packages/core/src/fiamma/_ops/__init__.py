"""Op modules: each installs its functions as Tensor methods."""
