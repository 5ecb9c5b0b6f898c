"""The ROS 2 side of wb_sim (rclpy): the simulator node, the example controller,
``wb_sim_run``, ``wb_sim_record`` and their message conversions.

``import wb_sim`` never imports this package; importing its modules needs rclpy,
except :mod:`.parameters` (the node's parameter declarations) and :mod:`.urdf` (mesh
URIs as ROS tools resolve them), which are pure Python: the core reads the node's
parameter names from the first, the browser viewer uses the second.
This file makes ``wb_sim.ros`` a regular package, so that ``find_packages`` ships
it in every install (colcon, ``pip install .``, a wheel).
"""
