"""Training Baleen: latent hop ordering (``hop_ordering``) and the model trainers."""
