"""A stand-in for PyTorch's Python (torch.nn.Module's call), copied by
test_user_line into a virtual environment's site-packages beside
stand_in_lib, whose model runs under it as a transformers model does."""
