"""Training the agent on its own trajectories: rejection fine-tuning (`python -m agent.train sft`).

The data are the loop's trajectory files (agent/trajectory.py); the model learns the exact text a
served model is shown (chat_format.py), and the loss falls on the assistant's turns alone.
"""
